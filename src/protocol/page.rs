//! `offset`/`limit` over the steps of `task_status` and `get_recording` (and
//! their `hub__task_status` / `hub__record_get` tools): a task or recording of
//! thousands of steps must fit a client's frame limit.

use serde::Deserialize;
use serde_json::{json, Value};

/// Which steps to return: `offset` (default 0) and `limit` (default
/// [`StepPage::DEFAULT_LIMIT`], at most [`StepPage::MAX_LIMIT`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepPage {
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl StepPage {
    pub const DEFAULT_LIMIT: usize = 100;
    pub const MAX_LIMIT: usize = 1000;

    /// The indices to return of `total` steps, and the reply's `stepsPage`:
    /// `{"offset","limit","returned","total","nextOffset"}` (`nextOffset`
    /// null on the last page). A `limit` outside 1..=1000 is brought into it;
    /// an `offset` past the end returns no steps.
    pub fn window(&self, total: usize) -> (std::ops::Range<usize>, Value) {
        let limit = self
            .limit
            .unwrap_or(Self::DEFAULT_LIMIT)
            .clamp(1, Self::MAX_LIMIT);
        let start = self.offset.unwrap_or(0).min(total);
        let end = start.saturating_add(limit).min(total);
        let next = (end < total).then_some(end);
        let info = json!({
            "offset": start,
            "limit": limit,
            "returned": end - start,
            "total": total,
            "nextOffset": next,
        });
        (start..end, info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(offset: Option<usize>, limit: Option<usize>) -> StepPage {
        StepPage { offset, limit }
    }

    #[test]
    fn window_defaults_to_the_first_hundred_and_says_where_next() {
        let (r, info) = page(None, None).window(250);
        assert_eq!(r, 0..100);
        assert_eq!(
            info,
            json!({"offset": 0, "limit": 100, "returned": 100, "total": 250, "nextOffset": 100})
        );
        let (r, info) = page(Some(200), None).window(250);
        assert_eq!(r, 200..250);
        assert_eq!(info["nextOffset"], Value::Null);
        let (r, info) = page(Some(900), Some(0)).window(250);
        assert_eq!(r, 250..250);
        assert_eq!(info["limit"], 1);
        assert_eq!(page(None, Some(5000)).window(3000).0, 0..1000);
    }
}
