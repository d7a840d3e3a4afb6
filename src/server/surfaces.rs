//! Every surface a client reaches, and what a client token may do there.
//!
//! One match per edge ([`of_ws`] over every `/ws` message, exhaustive;
//! [`of_mcp`] over every MCP request kind of the rmcp in use) names the
//! [`Area`] a request belongs to, and each area has one [`ClientRule`]. A new
//! `/ws` message does not compile until someone decides which area it is
//! in, and so what it shows to whom. The rules are applied where the
//! state lives (each service takes the request's `Caller`); [`ClientRule::MainOnly`]
//! is also refused here, once, before any handler runs (`dispatch::handle`).
//! docs/security.md ("Who may see and do what") has a row per area, with
//! the test that holds it; a unit test below keeps the two in step.

use crate::protocol::recording::RecordingMsg;
use crate::protocol::runs::RunMsg;
use crate::protocol::ClientMsg;

/// What a client token may do in an area (the main token may do all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientRule {
    /// Open to every caller the gate let in: it touches only the caller's
    /// own session (or nothing shared).
    Open,
    /// Within the caller's view: the view's tools, and what their servers
    /// offer besides tools.
    InView,
    /// The caller's own work: a client lists, reads, answers, changes and
    /// deletes what its principal made; another's is `NOT_FOUND`, the same
    /// as an unknown id.
    OwnWork,
    /// Shown in part: a client sees what concerns its views, never another
    /// client's name.
    Filtered,
    /// For the main token only: `PERMISSION` for a client.
    MainOnly,
}

impl ClientRule {
    /// The word docs/security.md's table gives the rule.
    pub fn word(self) -> &'static str {
        match self {
            ClientRule::Open => "open",
            ClientRule::InView => "in its view",
            ClientRule::OwnWork => "its own",
            ClientRule::Filtered => "filtered",
            ClientRule::MainOnly => "main token only",
        }
    }
}

macro_rules! areas {
    ($($variant:ident => $name:literal, $rule:ident;)+) => {
        /// A part of the hub a request reaches.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Area {
            $($variant),+
        }

        impl Area {
            pub const ALL: &'static [Area] = &[$(Area::$variant),+];

            /// Its name, as docs/security.md's table and refusals give it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Area::$variant => $name),+
                }
            }

            /// What a client token may do in it.
            pub fn rule(self) -> ClientRule {
                match self {
                    $(Area::$variant => ClientRule::$rule),+
                }
            }
        }
    };
}

areas! {
    Session => "session", Open;
    Tools => "tools", InView;
    Calls => "calls", InView;
    Tasks => "tasks", OwnWork;
    Questions => "questions", OwnWork;
    History => "history", OwnWork;
    Recordings => "recordings", OwnWork;
    Runs => "runs", OwnWork;
    Artifacts => "artifacts", OwnWork;
    KeptResults => "kept results", OwnWork;
    Instances => "instances", OwnWork;
    Health => "health", Filtered;
    Reload => "reload", InView;
    ApproveTools => "approving changed tools", MainOnly;
    Resources => "resources", InView;
    ResourceTemplates => "resource templates", InView;
    Prompts => "prompts", InView;
    Completion => "completion", InView;
}

/// The area of a `/ws` message.
pub fn of_ws(msg: &ClientMsg) -> Area {
    match msg {
        ClientMsg::Ping | ClientMsg::Ack(_) | ClientMsg::ResumeSession(_) => Area::Session,
        ClientMsg::ListTools => Area::Tools,
        ClientMsg::ToolCall(_) => Area::Calls,
        ClientMsg::ToolBatch(_)
        | ClientMsg::CancelTask(_)
        | ClientMsg::ResumeTask(_)
        | ClientMsg::TaskStatus(_)
        | ClientMsg::ListTasks(_) => Area::Tasks,
        ClientMsg::Confirm(_) => Area::Questions,
        ClientMsg::HealthCheck => Area::Health,
        ClientMsg::ReloadTools(r) if r.approve => Area::ApproveTools,
        ClientMsg::ReloadTools(_) => Area::Reload,
        ClientMsg::History(_) => Area::History,
        ClientMsg::Recording(m) => match m {
            RecordingMsg::Start(_)
            | RecordingMsg::Stop(_)
            | RecordingMsg::List(_)
            | RecordingMsg::Get(_)
            | RecordingMsg::Delete(_)
            | RecordingMsg::Export(_)
            | RecordingMsg::Update(_) => Area::Recordings,
            // A live replay is a task of the replaying caller, in its view,
            // of a recording it may see.
            RecordingMsg::Replay(_) => Area::Recordings,
        },
        ClientMsg::Run(m) => match m {
            RunMsg::Create(_)
            | RunMsg::Set(_)
            | RunMsg::List(_)
            | RunMsg::Get(_)
            | RunMsg::Log(_)
            | RunMsg::Archive(_)
            | RunMsg::Delete(_) => Area::Runs,
        },
        ClientMsg::Artifact(_) => Area::Artifacts,
        ClientMsg::StopInstance(_) => Area::Instances,
        ClientMsg::KeepResult(_) => Area::KeptResults,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECURITY: &str = include_str!("../../docs/security.md");

    /// The rows of the "Who may see and do what" table: (area, rule word,
    /// test cell).
    fn rows() -> Vec<(String, String, String)> {
        let Some(at) = SECURITY.find("### Who may see and do what") else {
            panic!("docs/security.md has no \"Who may see and do what\" section");
        };
        SECURITY[at..]
            .lines()
            .skip_while(|l| !l.starts_with("| area"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
                let cell = |i: usize| cells.get(i).copied().unwrap_or_default().to_string();
                (cell(0), cell(1), cell(cells.len().saturating_sub(1)))
            })
            .collect()
    }

    #[test]
    fn every_area_has_a_row_with_its_rule_and_a_test() {
        let rows = rows();
        for area in Area::ALL {
            let Some((_, rule, test)) = rows.iter().find(|(a, ..)| a == area.name()) else {
                panic!(
                    "docs/security.md's table has no row for area \"{}\"",
                    area.name()
                );
            };
            let word = area.rule().word();
            assert!(
                rule.starts_with(&format!("**{word}**")),
                "the row of \"{}\" gives a client token \"{rule}\"; the code says **{word}**",
                area.name()
            );
            assert!(
                test.contains("it::"),
                "the row of \"{}\" names no integration test",
                area.name()
            );
        }
        for (a, ..) in &rows {
            assert!(
                Area::ALL.iter().any(|x| x.name() == a),
                "docs/security.md's table names an area the code does not know: {a}"
            );
        }
    }

    #[test]
    fn only_approving_changed_tools_is_the_main_tokens_alone() {
        let main_only: Vec<_> = Area::ALL
            .iter()
            .filter(|a| a.rule() == ClientRule::MainOnly)
            .map(|a| a.name())
            .collect();
        assert_eq!(main_only, ["approving changed tools"]);
    }
}
