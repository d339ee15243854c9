//! Text on the wire: borrowed from the bytes read where it can be (no allocation per name),
//! owned when it had escapes or was made by a writer.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A JSON string, borrowed from the body unless it had escapes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Name<'a>(pub Cow<'a, str>);

impl<'a> Name<'a> {
    /// What a reader puts where a writer gave no name (a colo, say).
    pub fn unknown() -> Name<'a> {
        Name(Cow::Borrowed("unknown"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_owned(self) -> Name<'static> {
        Name(Cow::Owned(self.0.into_owned()))
    }
}

impl Deref for Name<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'a> From<&'a str> for Name<'a> {
    fn from(s: &'a str) -> Name<'a> {
        Name(Cow::Borrowed(s))
    }
}

impl From<String> for Name<'_> {
    fn from(s: String) -> Self {
        Name(Cow::Owned(s))
    }
}

impl Serialize for Name<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Name<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// The answer's `key`: written as a string; read from any JSON value, a value that is not a
/// string as its JSON text (a numeric key reads `417`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Key<'a>(pub Cow<'a, str>);

impl Key<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for Key<'_> {
    fn from(s: String) -> Self {
        Key(Cow::Owned(s))
    }
}

impl Serialize for Key<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        fn text<'a, E>(v: impl ToString) -> Result<Key<'a>, E> {
            Ok(Key(Cow::Owned(v.to_string())))
        }
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'a>, E> {
                text(v)
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v)))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Key<'a>, E> {
                text(v)
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key<'a>, E> {
                text(v)
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key<'a>, E> {
                text(v)
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key<'a>, E> {
                text(serde_json::Value::from(v))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, a: A) -> Result<Key<'a>, A::Error> {
                let v = serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(a))?;
                text(v)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, a: A) -> Result<Key<'a>, A::Error> {
                let v = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(a))?;
                text(v)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_borrow_unless_escaped() {
        let body = br#"["plain", "esc\"aped"]"#;
        let v: Vec<Name> = serde_json::from_slice(body).unwrap();
        assert!(matches!(v[0].0, Cow::Borrowed("plain")));
        assert!(matches!(&v[1].0, Cow::Owned(s) if s == "esc\"aped"));
    }

    #[test]
    fn keys_read_any_value_as_text() {
        let v: Vec<Key> = serde_json::from_str(r#"["k", 417, true, 1.5, [1], {"a":1}]"#).unwrap();
        let texts: Vec<&str> = v.iter().map(Key::as_str).collect();
        assert_eq!(texts, ["k", "417", "true", "1.5", "[1]", r#"{"a":1}"#]);
    }
}
