//! The run messages of a connection (`create_run`, `set_run`, …): each
//! answered for the session's caller, on the blocking pool, in the order
//! the connection sent them.

use std::sync::Arc;

use serde_json::Value;

use super::{cleared_event, Current, Runs};
use crate::errors::HubError;
use crate::protocol::runs::RunMsg;
use crate::protocol::{self, MsgId};
use crate::session::{Outbox, Place};

/// Handle a run message from a connection: on the blocking pool (every
/// message reads or writes run folders), in the order the connection sent
/// them; the reply goes out from the job.
pub fn handle(runs: &Arc<Runs>, out: &Outbox, id: MsgId, msg: RunMsg, place: Option<Place>) {
    let (me, owner) = (runs.clone(), out.clone());
    // A call sent after set_run waits for it before it is logged.
    let mark = matches!(msg, RunMsg::Set(_)).then(|| runs.setting.mark(&out.session));
    let job = runs.io.run(&[out.session.as_str()], move || {
        let out = owner;
        answer(&me, &out, &id, msg, place);
        drop(mark);
        Ok(())
    });
    tokio::spawn(job);
}

/// `place` (the message's place under its session's cap) is let go right
/// before the reply.
fn answer(runs: &Runs, out: &Outbox, id: &MsgId, msg: RunMsg, place: Option<Place>) {
    let place = std::cell::Cell::new(place);
    let caller = out.caller();
    let reply = |ty: &str, r: Result<Value, HubError>| {
        drop(place.take());
        let _sent = match r {
            Ok(v) => out.send(protocol::reply(ty, id, v)),
            Err(e) => out.send(protocol::error_msg(id, &e)),
        };
    };
    match msg {
        RunMsg::Create(r) => reply("run_created", runs.create(&caller, &r)),
        RunMsg::Set(r) => {
            // Say why an earlier context went away before replacing it.
            if let Current::Cleared { run_id, reason } = runs.current(&out.session) {
                out.send(cleared_event(&run_id, &reason));
            }
            reply("run_set", runs.set(&caller, &r.run_id))
        }
        RunMsg::List(r) => reply("runs", Ok(runs.list(&caller, &r))),
        RunMsg::Get(r) => reply("run", runs.get(&caller, &r)),
        RunMsg::Log(r) => reply("run_entry_logged", runs.log(&caller, r)),
        RunMsg::Archive(r) => reply("run_archived", runs.archive(&caller, &r.run_id)),
        RunMsg::Delete(r) => reply("run_deleted", runs.delete(&caller, &r.run_id)),
    }
}
