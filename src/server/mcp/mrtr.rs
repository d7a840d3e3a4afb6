//! The hub's own questions to a stateless (2026-07-28) client, by MRTR
//! (SEP-2322): a `confirm` safety rule answers the call with an
//! `InputRequiredResult` asking, by `elicitation/create`, whether to run
//! it; the client retries the same call with the answer in
//! `inputResponses` and the `requestState` echoed.
//!
//! An upstream 2026-07-28 server's own `InputRequiredResult` goes back to
//! the client the same way: its `inputRequests` as the server sent them,
//! and a `requestState` the hub mints around the server's (`relay`), so
//! the retry reaches that server with its state exactly as it was minted.
//!
//! The hub keeps nothing between the two requests but the nonces already
//! redeemed. `requestState` is sealed with rmcp's `RequestStateCodec`
//! (HMAC-SHA256 under a secret drawn at start, so a restart voids every
//! state), expires after [`STATE_TTL`], and is bound as associated data to
//! the call: the tool name, the arguments (canonical JSON) and the
//! client's `clientInfo`. A state that was altered, minted for another
//! call or client, expired, or already redeemed is refused; none is ever
//! trusted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResponse, CallToolResult, CreateTaskResult, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, RequestStateCodec, SealOptions,
};
use rmcp::ErrorData;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::hub::{Confirmer, Decision, Question};
use crate::mcp::registry::ToolInfo;
use crate::safety::blocked;

/// How long the client has to answer a question.
pub const STATE_TTL: Duration = Duration::from_secs(600);
/// Redeemed nonces kept at most (each for its state's lifetime).
const USED_MAX: usize = 10_000;
/// The `inputRequests` key of a confirmation.
pub const CONFIRM_KEY: &str = "toolhub_confirm";
/// How long the hub's id of a server's own task stays good.
const TASK_ID_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// What the hub's id of a server's own task (relayed) starts with.
pub const RELAYED_TASK: &str = "up-";

/// What a `requestState` the hub minted holds.
#[derive(Serialize, Deserialize)]
struct Sealed {
    /// What was asked: `confirm` (the hub's own question), `relay` (a
    /// 2026-07-28 server's) or `held` (a session-era server's, its call
    /// held open); or `task`, the hub's id of a server's own task.
    kind: String,
    nonce: String,
    /// `relay`: the server that asked, and its own `requestState`; `task`:
    /// the server and its own task id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upstream: Option<String>,
    /// `relay`: a `confirm` rule already had the person's yes for this
    /// call, so the retry does not ask again.
    #[serde(default)]
    confirmed: bool,
}

/// What a retry's `requestState` turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// The answer to the hub's own confirmation.
    Confirm(ConfirmAnswer),
    /// The answer to a session-era server's question of a held call: the
    /// call's key (single use is the held call's own: it is taken once).
    Held { nonce: String },
    /// Answers for an upstream server's question: the server, its state
    /// exactly as it minted it, and whether the call was already confirmed.
    Relay {
        server: String,
        upstream: Option<String>,
        confirmed: bool,
    },
}

/// The hub's sealing key and the nonces already redeemed.
pub struct States {
    codec: RequestStateCodec,
    used: Mutex<HashMap<String, Instant>>,
}

impl Default for States {
    fn default() -> Self {
        let key: [u8; 32] = rand::random();
        States {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            used: Mutex::new(HashMap::new()),
        }
    }
}

/// What a call is bound to: the tool, its arguments and the client.
pub fn binding(tool: &str, args: &Value, client: &str) -> Vec<u8> {
    let mut h = Sha256::new();
    for part in [tool, &canonical(args).to_string(), client] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().to_vec()
}

/// `v` with every object's keys in order, so equal arguments bind equally
/// whatever order the client sent them in.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The client's answer to a confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmAnswer {
    /// Accepted with `approve: true`.
    Approved,
    /// Declined, cancelled, or accepted without approving.
    Declined,
    /// The retry carried no answer under [`CONFIRM_KEY`]: ask again.
    Missing,
}

/// The refusal of a `requestState` the hub cannot trust (one message for
/// every cause, as rmcp's codec advises).
fn untrusted() -> ErrorData {
    ErrorData::invalid_params(
        "requestState is not one this hub issued for this call, or it was already used or has expired: send the call again without requestState and inputResponses, and answer the question it brings",
        None,
    )
}

/// What a relayed task's id is bound to: the client alone (`tasks/*`
/// carry no tool or arguments).
fn task_binding(client: &str) -> Vec<u8> {
    binding("tasks/*", &Value::Null, client)
}

impl States {
    fn seal(&self, sealed: &Sealed, binding: &[u8]) -> Result<String, ErrorData> {
        self.seal_for(sealed, binding, STATE_TTL)
    }

    fn seal_for(
        &self,
        sealed: &Sealed,
        binding: &[u8],
        ttl: Duration,
    ) -> Result<String, ErrorData> {
        let opts = SealOptions::new().associated_data(binding).ttl(ttl);
        self.codec
            .seal_json_with(sealed, &opts)
            .map_err(|e| ErrorData::internal_error(format!("requestState: {e}"), None))
    }

    fn nonce() -> String {
        hex::encode(rand::random::<[u8; 16]>())
    }

    /// A fresh state for a question about the call bound as `binding`.
    pub fn mint(&self, binding: &[u8]) -> Result<String, ErrorData> {
        let sealed = Sealed {
            kind: "confirm".into(),
            nonce: Self::nonce(),
            server: None,
            upstream: None,
            confirmed: false,
        };
        self.seal(&sealed, binding)
    }

    /// A fresh state wrapping `server`'s own `upstream` state, for its
    /// question about the call bound as `binding`.
    pub fn mint_relay(
        &self,
        binding: &[u8],
        server: &str,
        upstream: Option<String>,
        confirmed: bool,
    ) -> Result<String, ErrorData> {
        let sealed = Sealed {
            kind: "relay".into(),
            nonce: Self::nonce(),
            server: Some(server.to_string()),
            upstream,
            confirmed,
        };
        self.seal(&sealed, binding)
    }

    /// A fresh state naming the held call `nonce`, bound as `binding`.
    pub fn mint_held(&self, binding: &[u8], nonce: &str) -> Result<String, ErrorData> {
        let sealed = Sealed {
            kind: "held".into(),
            nonce: nonce.to_string(),
            server: None,
            upstream: None,
            confirmed: false,
        };
        self.seal(&sealed, binding)
    }

    /// The hub's id for `server`'s own task `upstream`, good for `client`
    /// only: `up-` and a sealed (server, id), so two servers' ids never
    /// collide and no client can name a task it was not given. A restart
    /// voids it (the sealing key is drawn at start).
    pub fn mint_task(
        &self,
        client: &str,
        server: &str,
        upstream: &str,
    ) -> Result<String, ErrorData> {
        let sealed = Sealed {
            kind: "task".into(),
            nonce: Self::nonce(),
            server: Some(server.to_string()),
            upstream: Some(upstream.to_string()),
            confirmed: false,
        };
        let id = self.seal_for(&sealed, &task_binding(client), TASK_ID_TTL)?;
        Ok(format!("{RELAYED_TASK}{id}"))
    }

    /// The (server, the server's own id) of a relayed task's id, for the
    /// client it was given to; `None` for an id this hub did not mint for
    /// it (or minted before a restart).
    pub fn open_task(&self, id: &str, client: &str) -> Option<(String, String)> {
        let sealed = id.strip_prefix(RELAYED_TASK)?;
        let s: Sealed = self
            .codec
            .open_json_with(sealed, &task_binding(client))
            .ok()?;
        match (s.kind.as_str(), s.server, s.upstream) {
            ("task", Some(server), Some(upstream)) => Some((server, upstream)),
            _ => None,
        }
    }

    /// Open a retry's state (once): what it answers.
    pub fn open(
        &self,
        state: &str,
        responses: Option<&InputResponses>,
        binding: &[u8],
    ) -> Result<Opened, ErrorData> {
        let sealed: Sealed = self.codec.open_json_with(state, binding).map_err(|e| {
            tracing::warn!(error = %e, "a requestState was refused");
            untrusted()
        })?;
        match (sealed.kind.as_str(), sealed.server) {
            ("confirm", _) => {
                self.redeem(&sealed.nonce)?;
                Ok(Opened::Confirm(confirm_answer(responses)))
            }
            ("held", _) => Ok(Opened::Held {
                nonce: sealed.nonce,
            }),
            ("relay", Some(server)) => {
                self.redeem(&sealed.nonce)?;
                Ok(Opened::Relay {
                    server,
                    upstream: sealed.upstream,
                    confirmed: sealed.confirmed,
                })
            }
            _ => Err(untrusted()),
        }
    }

    /// Mark `nonce` used; a second use is refused.
    fn redeem(&self, nonce: &str) -> Result<(), ErrorData> {
        let Ok(mut used) = self.used.lock() else {
            return Err(ErrorData::internal_error(
                "requestState store poisoned",
                None,
            ));
        };
        let now = Instant::now();
        if used.len() >= USED_MAX {
            used.retain(|_, t| *t > now);
        }
        if used.len() >= USED_MAX || used.contains_key(nonce) {
            return Err(untrusted());
        }
        used.insert(nonce.to_string(), now + STATE_TTL);
        Ok(())
    }
}

/// The person's answer under [`CONFIRM_KEY`].
fn confirm_answer(responses: Option<&InputResponses>) -> ConfirmAnswer {
    let Some(r) = responses.and_then(|r| r.get(CONFIRM_KEY)) else {
        return ConfirmAnswer::Missing;
    };
    let approved = r["action"] == "accept" && r["content"]["approve"] == Value::Bool(true);
    if approved {
        ConfirmAnswer::Approved
    } else {
        ConfirmAnswer::Declined
    }
}

/// The form a confirmation asks with (elicitation params): one boolean
/// `approve`; a session gets it as `elicitation/create`, a stateless
/// client inside an `InputRequiredResult`.
pub fn confirm_form(message: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {"approve": {"type": "boolean", "title": "Run this call", "default": false}},
            "required": ["approve"]
        }
    })
}

/// The `InputRequiredResult` that asks whether to run a call.
pub fn confirm_request(message: &str, state: String) -> Result<InputRequiredResult, ErrorData> {
    let request: InputRequest = serde_json::from_value(
        json!({"method": "elicitation/create", "params": confirm_form(message)}),
    )
    .map_err(|e| ErrorData::internal_error(format!("confirmation request: {e}"), None))?;
    let mut requests = InputRequests::new();
    requests.insert(CONFIRM_KEY.to_string(), request);
    Ok(InputRequiredResult::new(Some(requests), Some(state)))
}

/// What a `tools/call` answers: its result, or the hub's question.
pub enum Reply {
    Done(CallToolResult),
    Ask(InputRequiredResult),
    /// A server's own task, under the hub's id.
    Task(CreateTaskResult),
}

impl From<Reply> for CallToolResponse {
    fn from(r: Reply) -> Self {
        match r {
            Reply::Done(r) => r.into(),
            Reply::Ask(q) => q.into(),
            Reply::Task(t) => t.into(),
        }
    }
}

/// Words a confirmation: (tool, its params, the rule's reason) -> message.
type Wording = dyn Fn(&ToolInfo, &Value, &str) -> String + Send + Sync;

/// The `confirm` of a stateless call: the answer its retry brought, or,
/// with none, the question to send back (the call is refused for now and
/// answered with an `InputRequiredResult` instead).
pub struct ByResult {
    answer: Option<ConfirmAnswer>,
    can_elicit: bool,
    asked: Mutex<Option<Result<String, ErrorData>>>,
    message: Box<Wording>,
}

impl ByResult {
    /// `message` words the question (tool, redacted params, reason).
    pub fn new(
        answer: Option<ConfirmAnswer>,
        can_elicit: bool,
        message: impl Fn(&ToolInfo, &Value, &str) -> String + Send + Sync + 'static,
    ) -> ByResult {
        ByResult {
            answer,
            can_elicit,
            asked: Mutex::new(None),
            message: Box::new(message),
        }
    }

    /// What the call must answer instead of its outcome: the question
    /// (its message), or `-32021` when the request declared no
    /// elicitation to answer it with.
    pub fn asked(&self) -> Option<Result<String, ErrorData>> {
        self.asked.lock().ok().and_then(|mut a| a.take())
    }
}

impl Confirmer for ByResult {
    fn confirm<'a>(&'a self, q: Question<'a>) -> Decision<'a> {
        Box::pin(async move {
            let (info, reason) = (q.info, q.reason);
            match self.answer {
                Some(ConfirmAnswer::Approved) => return Ok(()),
                Some(ConfirmAnswer::Declined) => {
                    return Err(blocked(info, format!("the user declined: {reason}")))
                }
                Some(ConfirmAnswer::Missing) | None => {}
            }
            let ask = if self.can_elicit {
                Ok((self.message)(info, q.params, &reason))
            } else {
                Err(super::stateless::missing("elicitation"))
            };
            if let Ok(mut a) = self.asked.lock() {
                *a = Some(ask);
            }
            tracing::warn!(tool = %info.qualified_name, %reason, "asking a stateless MCP client to confirm (InputRequiredResult)");
            Err(blocked(
                info,
                format!("waiting for the person's confirmation ({reason}), asked by InputRequiredResult"),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer a confirmation's state opens to.
    fn answer(
        s: &States,
        state: &str,
        r: Option<&InputResponses>,
        b: &[u8],
    ) -> Result<ConfirmAnswer, ErrorData> {
        match s.open(state, r, b)? {
            Opened::Confirm(a) => Ok(a),
            _ => Err(untrusted()),
        }
    }

    fn accept(approve: bool) -> InputResponses {
        let mut r = InputResponses::new();
        r.insert(
            CONFIRM_KEY.into(),
            json!({"action": "accept", "content": {"approve": approve}}),
        );
        r
    }

    #[test]
    fn a_state_opens_once_for_its_own_call_only() {
        let s = States::default();
        let b = binding("t__write", &json!({"b": 1, "a": [2]}), "client 1");
        let state = s.mint(&b).expect("mint");
        // Key order does not matter; another tool, arguments or client does.
        let same = binding("t__write", &json!({"a": [2], "b": 1}), "client 1");
        for other in [
            binding("t__other", &json!({"b": 1, "a": [2]}), "client 1"),
            binding("t__write", &json!({"b": 2, "a": [2]}), "client 1"),
            binding("t__write", &json!({"b": 1, "a": [2]}), "client 2"),
        ] {
            assert!(answer(&s, &state, Some(&accept(true)), &other).is_err());
        }
        assert_eq!(
            answer(&s, &state, Some(&accept(true)), &same).ok(),
            Some(ConfirmAnswer::Approved)
        );
        // Replayed: refused.
        assert!(answer(&s, &state, Some(&accept(true)), &same).is_err());
    }

    #[test]
    fn a_tampered_state_is_refused_and_answers_are_read() {
        let s = States::default();
        let b = binding("t", &json!({}), "c");
        let state = s.mint(&b).expect("mint");
        let mut bytes = state.clone().into_bytes();
        let last = bytes.len() - 1;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).expect("utf8");
        assert!(answer(&s, &tampered, Some(&accept(true)), &b).is_err());
        assert!(answer(&States::default(), &state, Some(&accept(true)), &b).is_err());
        assert_eq!(
            answer(&s, &state, Some(&accept(false)), &b).ok(),
            Some(ConfirmAnswer::Declined)
        );
        let again = s.mint(&b).expect("mint");
        assert_eq!(
            answer(&s, &again, None, &b).ok(),
            Some(ConfirmAnswer::Missing)
        );
    }

    #[test]
    fn a_relay_state_carries_the_servers_own_state_exactly_once() {
        let s = States::default();
        let b = binding("conf__ask", &json!({}), "client 1");
        let upstream = "opaque/+=state of the server".to_string();
        let state = s
            .mint_relay(&b, "conf", Some(upstream.clone()), true)
            .expect("mint");
        let other = binding("conf__ask", &json!({}), "client 2");
        assert!(s.open(&state, None, &other).is_err());
        assert_eq!(
            s.open(&state, None, &b).ok(),
            Some(Opened::Relay {
                server: "conf".into(),
                upstream: Some(upstream),
                confirmed: true
            })
        );
        assert!(s.open(&state, None, &b).is_err(), "replayed");
        // A confirmation's state is not a relay's, and the other way round.
        let confirm = s.mint(&b).expect("mint");
        assert!(matches!(
            s.open(&confirm, None, &b),
            Ok(Opened::Confirm(ConfirmAnswer::Missing))
        ));
    }

    #[test]
    fn a_relayed_task_id_opens_for_its_client_only() {
        let s = States::default();
        let id = s.mint_task("client 1", "m", "own-0").expect("mint");
        assert!(
            id.starts_with(RELAYED_TASK) && !id.contains("own-0"),
            "{id}"
        );
        assert_eq!(
            s.open_task(&id, "client 1"),
            Some(("m".into(), "own-0".into()))
        );
        // Again: a task id is not single-use.
        assert!(s.open_task(&id, "client 1").is_some());
        assert_eq!(s.open_task(&id, "client 2"), None);
        // Altered, another hub's, or a requestState passed as an id.
        let mut altered = id.clone();
        altered.push('x');
        assert_eq!(s.open_task(&altered, "client 1"), None);
        assert_eq!(States::default().open_task(&id, "client 1"), None);
        let b = binding("tasks/*", &Value::Null, "client 1");
        let state = s
            .mint_relay(&b, "m", Some("up".into()), false)
            .expect("mint");
        assert_eq!(
            s.open_task(&format!("{RELAYED_TASK}{state}"), "client 1"),
            None
        );
    }
}
