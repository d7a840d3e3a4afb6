//! The bodies of the run messages (`create_run`, `set_run`, `list_runs`,
//! `get_run`, `log_run_entry`, `archive_run`, `delete_run`), decoded into
//! `ClientMsg::Run`. The `hub__run_*` tools decode their params into the
//! same types.

use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone)]
pub enum RunMsg {
    Create(CreateRunReq),
    Set(RunRef),
    List(ListRunsReq),
    Get(GetRunReq),
    Log(LogEntryReq),
    Archive(RunRef),
    Delete(RunRef),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRunReq {
    pub theme: String,
    #[serde(default)]
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRef {
    pub run_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusFilter {
    Active,
    Archived,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListRunsReq {
    #[serde(default)]
    pub status: Option<StatusFilter>,
    /// Paging as the other listings (`deny_unknown_fields` and
    /// `#[serde(flatten)]` do not mix, so the two fields are spelled out).
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl ListRunsReq {
    pub fn page(&self) -> super::paging::Paging {
        super::paging::Paging {
            offset: self.offset,
            limit: self.limit,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetRunReq {
    pub run_id: String,
    /// How many of the last log entries to return (default 20, at most 1000).
    #[serde(default)]
    pub tail: Option<usize>,
}

/// An entry the agent writes itself. The enum fields are checked by the
/// run model (so the error names the allowed values); the names follow the
/// data model (`action_type`), camelCase is accepted too.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogEntryReq {
    pub step: String,
    pub status: String,
    #[serde(alias = "actionType")]
    pub action_type: String,
    #[serde(alias = "executionMethod")]
    pub execution_method: String,
    #[serde(default)]
    pub data: Map<String, Value>,
    /// Another run than the connection's current one.
    #[serde(default, alias = "runId")]
    pub run_id: Option<String>,
}
