//! Typed access to a decoded msgpack map, with errors that say where a field is wrong.

use super::CodeObjectError;
use rmpv::Value;

/// A msgpack map with string keys and the path that leads to it (for error messages).
pub(crate) struct Map<'a> {
    entries: &'a [(Value, Value)],
    at: String,
}

/// Decode one msgpack value from `bytes`; trailing bytes are ignored (notes are padded).
pub(crate) fn decode(bytes: &[u8]) -> Result<Value, CodeObjectError> {
    let mut rd = bytes;
    rmpv::decode::read_value(&mut rd).map_err(|e| CodeObjectError::Msgpack(e.to_string()))
}

fn bad(at: &str, what: impl Into<String>) -> CodeObjectError {
    CodeObjectError::Metadata {
        at: at.to_string(),
        what: what.into(),
    }
}

impl<'a> Map<'a> {
    /// View `value` as a map; `at` names it in errors.
    pub(crate) fn new(value: &'a Value, at: impl Into<String>) -> Result<Self, CodeObjectError> {
        let at = at.into();
        match value.as_map() {
            Some(entries) => Ok(Map { entries, at }),
            None => Err(bad(&at, format!("expected a map, found {}", kind(value)))),
        }
    }

    /// The path of this map.
    pub(crate) fn at(&self) -> &str {
        &self.at
    }

    /// The path of a field of this map.
    pub(crate) fn field_at(&self, key: &str) -> String {
        format!("{}.{}", self.at, key.trim_start_matches('.'))
    }

    /// The raw value of `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    fn required(&self, key: &str) -> Result<&'a Value, CodeObjectError> {
        self.get(key)
            .ok_or_else(|| bad(&self.field_at(key), "required field is missing"))
    }

    /// A required unsigned integer that fits in `u32`.
    pub(crate) fn u32(&self, key: &str) -> Result<u32, CodeObjectError> {
        let v = self.required(key)?;
        self.to_u32(key, v)
    }

    /// An optional unsigned integer that fits in `u32`.
    pub(crate) fn opt_u32(&self, key: &str) -> Result<Option<u32>, CodeObjectError> {
        self.get(key).map(|v| self.to_u32(key, v)).transpose()
    }

    fn to_u32(&self, key: &str, v: &Value) -> Result<u32, CodeObjectError> {
        let n = v.as_u64().ok_or_else(|| {
            bad(
                &self.field_at(key),
                format!("expected an unsigned integer, found {}", kind(v)),
            )
        })?;
        u32::try_from(n)
            .map_err(|_| bad(&self.field_at(key), format!("{n} does not fit in 32 bits")))
    }

    /// A required string.
    pub(crate) fn str(&self, key: &str) -> Result<&'a str, CodeObjectError> {
        let v = self.required(key)?;
        self.to_str(key, v)
    }

    /// An optional string.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, CodeObjectError> {
        self.get(key).map(|v| self.to_str(key, v)).transpose()
    }

    fn to_str(&self, key: &str, v: &'a Value) -> Result<&'a str, CodeObjectError> {
        v.as_str().ok_or_else(|| {
            bad(
                &self.field_at(key),
                format!("expected a UTF-8 string, found {}", kind(v)),
            )
        })
    }

    /// An optional boolean.
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, CodeObjectError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| {
                bad(
                    &self.field_at(key),
                    format!("expected a boolean, found {}", kind(v)),
                )
            }),
        }
    }

    /// An optional array.
    pub(crate) fn opt_array(&self, key: &str) -> Result<Option<&'a [Value]>, CodeObjectError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_array().map(|a| Some(a.as_slice())).ok_or_else(|| {
                bad(
                    &self.field_at(key),
                    format!("expected an array, found {}", kind(v)),
                )
            }),
        }
    }

    /// An error at a field of this map.
    pub(crate) fn error(&self, key: &str, what: impl Into<String>) -> CodeObjectError {
        bad(&self.field_at(key), what)
    }
}

/// A short name of a msgpack value's kind, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "a boolean",
        Value::Integer(_) => "an integer",
        Value::F32(_) | Value::F64(_) => "a float",
        Value::String(_) => "a string",
        Value::Binary(_) => "binary data",
        Value::Array(_) => "an array",
        Value::Map(_) => "a map",
        Value::Ext(..) => "an extension value",
    }
}
