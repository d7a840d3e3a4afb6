//! Whole-batch validation before anything runs: every problem is collected
//! with its step index, and an invalid batch gets one `INVALID_MESSAGE`.

use std::collections::HashSet;

use serde::Serialize;

use super::condition::{self, Condition};
use super::expect::Expectations;
use super::template::Templates;
use crate::mcp::registry::ToolSnapshot;
use crate::protocol::{BatchOptions, BatchStep};
use crate::retry::RetryOverride;

/// One step, checked and compiled once (regexes, conditions, expectations).
#[derive(Debug, Clone)]
pub struct PlannedStep {
    pub step: BatchStep,
    pub when: Option<Condition>,
    pub expect: Option<Expectations>,
    pub retry: RetryOverride,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub steps: Vec<PlannedStep>,
    pub options: BatchOptions,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_index: Option<usize>,
    pub message: String,
}

impl Problem {
    fn at(i: usize, step: &BatchStep, message: String) -> Problem {
        let label = match &step.id {
            Some(id) => format!("step {i} ({id})"),
            None => format!("step {i}"),
        };
        Problem {
            step_index: Some(i),
            message: format!("{label}: {message}"),
        }
    }
}

/// The variable that always exists: `{{vars.x}}` from `options.variables`.
pub const VARS: &str = "vars";

/// Everything but tool resolution: used for tasks recovered from their
/// journal at start-up, before the servers are back (tools are resolved
/// again when each step runs).
pub fn validate_structure(
    steps: &[BatchStep],
    options: &BatchOptions,
    templates: &Templates,
) -> Result<Plan, Vec<Problem>> {
    check(steps, options, None, templates, usize::MAX)
}

pub fn validate(
    steps: &[BatchStep],
    options: &BatchOptions,
    tools: &ToolSnapshot,
    templates: &Templates,
    max_steps: usize,
) -> Result<Plan, Vec<Problem>> {
    check(steps, options, Some(tools), templates, max_steps)
}

fn check(
    steps: &[BatchStep],
    options: &BatchOptions,
    tools: Option<&ToolSnapshot>,
    templates: &Templates,
    max_steps: usize,
) -> Result<Plan, Vec<Problem>> {
    let mut problems = Vec::new();
    if steps.is_empty() {
        problems.push(Problem {
            step_index: None,
            message: "steps is empty; expected at least one step".into(),
        });
    }
    if steps.len() > max_steps {
        problems.push(Problem {
            step_index: None,
            message: format!(
                "{} steps is over the limit of {max_steps} (taskEngine.maxBatchSteps)",
                steps.len()
            ),
        });
        return Err(problems);
    }
    let mut ids = HashSet::new();
    let mut defined: HashSet<String> = HashSet::new();
    let mut planned = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let mut bad = |m: String| problems.push(Problem::at(i, step, m));
        if let Some(id) = &step.id {
            if !ids.insert(id.clone()) {
                bad(format!("duplicate step id \"{id}\""));
            }
        }
        if let Some(t) = tools {
            if let Err(e) = t.resolve(&step.tool) {
                // A server still starting (right after a hub or config
                // restart) is not a mistake in the batch: the step waits for
                // it when it runs (`resolve_settled`, bounded by its timeout).
                let starting = e
                    .server
                    .as_ref()
                    .and_then(|s| t.unavailable().get(s))
                    .is_some_and(|why| why.starts_with("starting"));
                if !starting {
                    bad(e.message.clone());
                }
            }
        }
        let mut used: Vec<String> = Vec::new();
        match templates.check_params(&step.params) {
            Ok(roots) => used.extend(roots),
            Err(e) => bad(format!("params: {e}")),
        }
        let when = match &step.when {
            None => None,
            Some(v) => match condition::parse(v, templates) {
                Ok(c) => {
                    used.extend(c.referenced_vars());
                    Some(c)
                }
                Err(e) => {
                    bad(format!("when: {e}"));
                    None
                }
            },
        };
        let expect = match &step.expect {
            None => None,
            Some(v) => match Expectations::parse(v) {
                Ok(e) => Some(e),
                Err(e) => {
                    bad(format!("expect: {e}"));
                    None
                }
            },
        };
        let retry = match RetryOverride::parse(step.retry.as_ref()) {
            Ok(r) => r,
            Err(e) => {
                bad(e);
                RetryOverride::Default
            }
        };
        for name in used {
            if name != VARS && !defined.contains(&name) && !Templates::is_reserved(&name) {
                let later = steps[i + 1..]
                    .iter()
                    .any(|s| s.save_as.as_deref() == Some(name.as_str()));
                if later {
                    bad(format!(
                        "uses \"{name}\" before the step that saves it (saveAs) has run"
                    ));
                } else {
                    let mut known: Vec<_> = defined.iter().cloned().collect();
                    known.push(VARS.into());
                    known.sort();
                    bad(format!(
                        "uses unknown variable \"{name}\"; defined so far: {}",
                        known.join(", ")
                    ));
                }
            }
        }
        if let Some(name) = &step.save_as {
            if name == VARS || Templates::is_reserved(name) {
                bad(format!("saveAs \"{name}\" is a reserved name"));
            } else if !defined.insert(name.clone()) {
                bad(format!("duplicate saveAs \"{name}\""));
            }
        }
        planned.push(PlannedStep {
            step: step.clone(),
            when,
            expect,
            retry,
        });
    }
    if problems.is_empty() {
        Ok(Plan {
            steps: planned,
            options: options.clone(),
        })
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn problems_with(server_state: &str) -> usize {
        let steps: Vec<BatchStep> =
            serde_json::from_value(json!([{"tool": "t__echo", "params": {}}])).expect("steps");
        let options: BatchOptions = serde_json::from_value(json!({})).expect("options");
        let tools = ToolSnapshot::empty("hub").with_unavailable(BTreeMap::from([(
            "t".to_string(),
            server_state.to_string(),
        )]));
        validate(&steps, &options, &tools, &Templates::new(), 100)
            .err()
            .map_or(0, |p| p.len())
    }

    #[test]
    fn a_starting_server_is_waited_for_a_down_one_is_refused() {
        assert_eq!(problems_with("starting"), 0);
        assert_eq!(problems_with("starting: exited with code 1"), 0);
        assert_eq!(problems_with("down: exited with code 1"), 1);
    }
}
