//! Unknown-key detection for config.json: the field names serde expects
//! for a Raw type (read from the type itself), and the keys of an object
//! that are not among them. `raw` checks the sections, `views` its own.

use serde::de::{self, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::locate::esc;

/// The (renamed) field names serde expects for struct `T`, read by asking `T`
/// to deserialize itself from a deserializer that only records them.
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Introspect<'f>(&'f mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Introspect<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields recorded"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Introspect(&mut fields));
    fields
}

/// A key serde will ignore.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownKey {
    /// Pointer of the unknown key itself.
    pub pointer: String,
    pub key: String,
    pub known: &'static [&'static str],
}

pub(super) fn entries(v: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> {
    v.and_then(Value::as_object).into_iter().flatten()
}

/// Every key of the object `v` (at `pointer`) that is not in `known`.
pub fn check_keys(
    out: &mut Vec<UnknownKey>,
    v: &Value,
    pointer: &str,
    known: &'static [&'static str],
) {
    check(out, v, pointer, known)
}

pub(super) fn check(
    out: &mut Vec<UnknownKey>,
    v: &Value,
    pointer: &str,
    known: &'static [&'static str],
) {
    for (key, _) in entries(Some(v)) {
        if !known.contains(&key.as_str()) {
            out.push(UnknownKey {
                pointer: format!("{pointer}/{}", esc(key)),
                key: key.clone(),
                known,
            });
        }
    }
}
