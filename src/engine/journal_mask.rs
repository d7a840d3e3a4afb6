//! Secret values masked out of a journal record before it is written.

use crate::secrets::SecretValues;
use crate::store::journal::Record;

/// Mask every known secret value in what a record carries (params,
/// outcomes, variables, errors, reasons, names), in place: no round trip
/// through a JSON tree. The record's own numbers (index, timestamps) are
/// never masked, so the line always reads back.
pub(super) fn mask_record(mut rec: Record, secrets: &SecretValues) -> Record {
    if secrets.is_empty() {
        return rec;
    }
    let text = |s: &mut String| secrets.mask_string(s);
    match &mut rec {
        Record::Header {
            task_id,
            batch_id,
            steps,
            options,
            hub_version,
            ..
        } => {
            text(task_id);
            text(hub_version);
            secrets.mask_in_place(batch_id);
            secrets.mask_in_place(steps);
            secrets.mask_in_place(options);
        }
        Record::StepStarted { params, .. } => secrets.mask_in_place(params),
        Record::StepFinished {
            state,
            outcome,
            var,
            ..
        } => {
            text(state);
            secrets.mask_in_place(outcome);
            if let Some(v) = var {
                secrets.mask_in_place(v);
            }
        }
        Record::State { state, error, .. } => {
            text(state);
            if let Some(e) = error {
                secrets.mask_in_place(e);
            }
        }
        Record::NeedUser {
            reason,
            params_hash,
            ..
        } => {
            text(reason);
            text(params_hash);
        }
        Record::Decision { params_hash, .. } => text(params_hash),
        Record::End { state, .. } => text(state),
        Record::Resume { .. } => {}
    }
    rec
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn security(secret: &str) -> SecretValues {
        let s = SecretValues::default();
        s.add(secret);
        s
    }

    #[test]
    fn payloads_are_masked_and_the_record_keeps_its_shape() {
        let s = security("hunter22");
        let rec = Record::StepFinished {
            index: 3,
            state: "success".into(),
            outcome: json!({"result": {"text": "login with hunter22"}, "n": 7}),
            var: Some(json!({"name": "v", "value": "hunter22"})),
            ts: 9,
        };
        let Record::StepFinished {
            index,
            outcome,
            var,
            ts,
            ..
        } = mask_record(rec, &s)
        else {
            panic!("the kind changed");
        };
        assert_eq!((index, ts), (3, 9));
        assert_eq!(outcome["result"]["text"], "login with ***");
        assert_eq!(var, Some(json!({"name": "v", "value": "***"})));
        let need = mask_record(
            Record::NeedUser {
                index: 0,
                reason: "asks for hunter22".into(),
                params_hash: "h".into(),
                ts: 1,
            },
            &s,
        );
        assert!(matches!(need, Record::NeedUser { reason, .. } if reason == "asks for ***"));
    }

    #[test]
    fn a_secret_that_equals_a_records_own_number_does_not_unmask_the_rest() {
        // Masking the whole record as one JSON tree turned `index: 1234` into
        // "***", the tree no longer read back as a record, and the record was
        // written unmasked. The record's own numbers are not payload.
        let s = security("1234");
        let rec = Record::StepStarted {
            index: 1234,
            params: json!({"pin": "card 1234", "n": 1234}),
            ts: 5,
        };
        let Record::StepStarted { index, params, ts } = mask_record(rec, &s) else {
            panic!("the kind changed");
        };
        assert_eq!((index, ts), (1234, 5));
        assert_eq!(params, json!({"pin": "card ***", "n": "***"}));
    }

    #[test]
    fn without_secrets_a_record_is_left_alone() {
        let s = SecretValues::default();
        let rec = Record::State {
            state: "running".into(),
            error: Some(json!({"message": "x"})),
            ts: 1,
        };
        assert_eq!(mask_record(rec.clone(), &s), rec);
    }
}
