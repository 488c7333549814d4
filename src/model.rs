//! The data model: nodes, edges, events and the graph assertions events carry.
//!
//! These are the types persisted in the store (through [`crate::codec`]) and returned by the
//! read API. Labels, relations and event kinds are open sets of strings; the constants in
//! [`labels`], [`relations`] and [`kinds`] name the ones the synthetic world and the built-in
//! queries use.
//!
//! Times: `ts`, `valid_from`, `valid_to`, `last_seen`, `created` and `updated` are *world*
//! time (whatever clock the agent uses: game ticks, unix milliseconds); `recorded` and
//! `recorded_at` are wall-clock milliseconds at which the store appended the event. Both are
//! fixed in the log, so replay derives the same values.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Dense identifier of a node inside one store, assigned by the projection in order of first
/// appearance and never reused, so replay assigns the same ids.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// Dense identifier of an edge inside one store (same rules as [`NodeId`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EdgeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for EdgeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// Property map of a node or edge.
pub type Props = BTreeMap<String, Value>;

/// A JSON-like property value.
///
/// In human-readable formats (JSON) it reads and writes as plain JSON; in binary formats
/// (postcard, on disk) it is a tagged enum, because postcard cannot describe itself.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The number inside as f64, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The integer inside, if this is an integer (or a float with no fraction).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Float(f) if f.fract() == 0.0 => Some(*f as i64),
            _ => None,
        }
    }

    /// Appends every string found in this value (recursively) to `out`, space separated.
    /// This is the text the full-text index sees for properties and payloads.
    pub fn collect_text(&self, out: &mut String) {
        match self {
            Value::Str(s) => {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(s);
            }
            Value::List(items) => items.iter().for_each(|v| v.collect_text(out)),
            Value::Map(map) => map.values().for_each(|v| v.collect_text(out)),
            _ => {}
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// How deep a stored [`Value`] may nest. JSON input stops at serde_json's 128; a stored record
/// nested deeper is damaged or crafted, and decoding it recursively would overflow the stack.
const MAX_STORED_DEPTH: u32 = 256;

thread_local! {
    /// The nesting of the stored values being decoded on this thread.
    static STORED_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One level of a stored value's decoding; leaves it when dropped (on errors too).
struct StoredDepth;

impl StoredDepth {
    fn enter<E: de::Error>() -> Result<Self, E> {
        STORED_DEPTH.with(|d| {
            if d.get() >= MAX_STORED_DEPTH {
                return Err(E::custom(format!(
                    "a value nested more than {MAX_STORED_DEPTH} deep"
                )));
            }
            d.set(d.get() + 1);
            Ok(StoredDepth)
        })
    }
}

impl Drop for StoredDepth {
    fn drop(&mut self) {
        STORED_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// The binary (tagged) form of [`Value`], its maps read as `M` (a reader may leave entries
/// out: [`PayloadWithoutDigest`]).
#[derive(Serialize, Deserialize)]
enum TaggedValue<M = BTreeMap<String, Value>> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Map(M),
}

impl<M: Into<BTreeMap<String, Value>>> From<TaggedValue<M>> for Value {
    fn from(tagged: TaggedValue<M>) -> Value {
        match tagged {
            TaggedValue::Null => Value::Null,
            TaggedValue::Bool(b) => Value::Bool(b),
            TaggedValue::Int(i) => Value::Int(i),
            TaggedValue::Float(f) => Value::Float(f),
            TaggedValue::Str(v) => Value::Str(v),
            TaggedValue::List(v) => Value::List(v),
            TaggedValue::Map(m) => Value::Map(m.into()),
        }
    }
}

/// The payload key under which a summary restates its period's facts.
pub(crate) const SUMMARY_DIGEST: &str = "digest";

/// A stored payload read without its top-level [`SUMMARY_DIGEST`] entry, which is walked past
/// ([`SkippedValue`]), not built: for a reader of what summaries say, not the facts they
/// restate.
pub(crate) struct PayloadWithoutDigest(pub(crate) Value);

impl<'de> Deserialize<'de> for PayloadWithoutDigest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let _depth = StoredDepth::enter::<D::Error>()?;
        TaggedValue::<MapWithoutDigest>::deserialize(d).map(|t| PayloadWithoutDigest(t.into()))
    }
}

impl From<PayloadWithoutDigest> for Value {
    fn from(payload: PayloadWithoutDigest) -> Value {
        payload.0
    }
}

/// A stored payload walked past ([`SkippedValue`]) and read as null: for a reader of what an
/// event asserts, not what it says.
pub(crate) struct PayloadSkipped;

impl<'de> Deserialize<'de> for PayloadSkipped {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        SkippedValue::deserialize(d).map(|_| PayloadSkipped)
    }
}

impl From<PayloadSkipped> for Value {
    fn from(_: PayloadSkipped) -> Value {
        Value::Null
    }
}

/// A stored map without its [`SUMMARY_DIGEST`] entry.
struct MapWithoutDigest(BTreeMap<String, Value>);

impl From<MapWithoutDigest> for BTreeMap<String, Value> {
    fn from(map: MapWithoutDigest) -> Self {
        map.0
    }
}

impl<'de> Deserialize<'de> for MapWithoutDigest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = MapWithoutDigest;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of values")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<MapWithoutDigest, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == SUMMARY_DIGEST {
                        map.next_value::<SkippedValue>()?;
                    } else {
                        out.insert(key, map.next_value::<Value>()?);
                    }
                }
                Ok(MapWithoutDigest(out))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// A stored [`Value`] read past and dropped: its strings borrowed from the record, no map or
/// list built. For a reader that does not want an entry of a payload (a summary's digest,
/// which restates its period's facts) but must walk it to reach what follows.
struct SkippedValue;

impl<'de> Deserialize<'de> for SkippedValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return de::IgnoredAny::deserialize(d).map(|_| SkippedValue);
        }
        // Bounded as a stored value's decoding is: a damaged record could nest without end.
        let _depth = StoredDepth::enter::<D::Error>()?;
        TaggedSkip::deserialize(d).map(|_| SkippedValue)
    }
}

/// [`TaggedValue`]'s shape (the same variants in the same order, so the same encoding), with
/// nothing kept.
#[derive(Deserialize)]
#[allow(dead_code)] // Read only to be walked past.
enum TaggedSkip<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    List(SkippedList),
    Map(SkippedMap),
}

/// A stored list of values, walked.
struct SkippedList;

impl<'de> Deserialize<'de> for SkippedList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Walk;
        impl<'de> Visitor<'de> for Walk {
            type Value = SkippedList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of values")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SkippedList, A::Error> {
                while seq.next_element::<SkippedValue>()?.is_some() {}
                Ok(SkippedList)
            }
        }
        d.deserialize_seq(Walk)
    }
}

/// A stored map of values, walked.
struct SkippedMap;

impl<'de> Deserialize<'de> for SkippedMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Walk;
        impl<'de> Visitor<'de> for Walk {
            type Value = SkippedMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SkippedMap, A::Error> {
                while map.next_entry::<&'de str, SkippedValue>()?.is_some() {}
                Ok(SkippedMap)
            }
        }
        d.deserialize_map(Walk)
    }
}

#[derive(Serialize)]
enum TaggedValueRef<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    List(&'a [Value]),
    Map(&'a BTreeMap<String, Value>),
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            match self {
                Value::Null => s.serialize_unit(),
                Value::Bool(b) => s.serialize_bool(*b),
                Value::Int(i) => s.serialize_i64(*i),
                Value::Float(f) => s.serialize_f64(*f),
                Value::Str(v) => s.serialize_str(v),
                Value::List(v) => v.serialize(s),
                Value::Map(v) => v.serialize(s),
            }
        } else {
            let tagged = match self {
                Value::Null => TaggedValueRef::Null,
                Value::Bool(b) => TaggedValueRef::Bool(*b),
                Value::Int(i) => TaggedValueRef::Int(*i),
                Value::Float(f) => TaggedValueRef::Float(*f),
                Value::Str(v) => TaggedValueRef::Str(v),
                Value::List(v) => TaggedValueRef::List(v),
                Value::Map(v) => TaggedValueRef::Map(v),
            };
            tagged.serialize(s)
        }
    }
}

/// What the refusal of an integer [`inexact_integer`] found says, after its place.
pub fn inexact_integer_message(digits: &str) -> String {
    format!(
        "integer {} is beyond 64 bits (below {} or above {}), and would be kept as another \
         number; write it as a string",
        crate::error::excerpt(digits),
        i64::MIN,
        u64::MAX
    )
}

/// An integer of JSON text `json` that no integer type here holds (below `i64::MIN` or
/// above `u64::MAX`), as `(path, digits)`: serde_json reads such a literal as the nearest
/// float, so it would be kept as another number without a word. `path` names where it is as
/// serde_path_to_error does (`payload.x`, `assert[0].props.n`; empty at the top), each key as
/// written, escapes and all. Integers
/// between `i64::MAX` and `u64::MAX` are not named: a field of `u64` holds them, and a
/// [`Value`] refuses them itself. Text that is not JSON gives whatever it finds; call it on
/// text that parsed.
pub fn inexact_integer(json: &str) -> Option<(String, String)> {
    // No such integer has fewer than 19 digits: most text is passed by after one look.
    let mut run = 0;
    if !json.bytes().any(|b| {
        run = if b.is_ascii_digit() { run + 1 } else { 0 };
        run >= 19
    }) {
        return None;
    }
    enum Frame<'a> {
        Object {
            key: Option<&'a str>,
            expect_key: bool,
        },
        Array(usize),
    }
    let path = |stack: &[Frame<'_>]| {
        let mut out = String::new();
        for f in stack {
            match f {
                Frame::Object { key: Some(k), .. } => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Frame::Object { key: None, .. } => {}
                Frame::Array(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    };
    let bytes = json.as_bytes();
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let text = json.get(start..i.min(bytes.len())).unwrap_or("");
                if let Some(Frame::Object { key, expect_key }) = stack.last_mut() {
                    if *expect_key {
                        *key = Some(text);
                        *expect_key = false;
                    }
                }
                i += 1;
            }
            b'{' => {
                stack.push(Frame::Object {
                    key: None,
                    expect_key: true,
                });
                i += 1;
            }
            b'[' => {
                stack.push(Frame::Array(0));
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                i += 1;
            }
            b',' => {
                match stack.last_mut() {
                    Some(Frame::Array(n)) => *n += 1,
                    Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                    None => {}
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &json[start..i];
                let whole = !token.contains(['.', 'e', 'E']);
                if whole && token.parse::<i64>().is_err() && token.parse::<u64>().is_err() {
                    return Some((path(&stack), token.to_string()));
                }
            }
            _ => i += 1,
        }
    }
    None
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            d.deserialize_any(ValueVisitor)
        } else {
            let _depth = StoredDepth::enter::<D::Error>()?;
            TaggedValue::<BTreeMap<String, Value>>::deserialize(d).map(Value::from)
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        // A silent conversion to a float would change the number; say so instead.
        i64::try_from(v).map(Value::Int).map_err(|_| {
            E::custom(format!(
                "integer {v} is larger than {} (the largest integer kept exactly); write it as a string",
                i64::MAX
            ))
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::List(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        unique_entries(map).map(Value::Map)
    }
}

/// What the refusal of a key given twice in one JSON object says, after the key.
pub(crate) const KEY_GIVEN_TWICE: &str = "is given twice in one object";

/// Whether `e`, from reading JSON as a [`Value`], is the refusal of a key given twice (where
/// serde_json's own reading keeps the last value).
pub(crate) fn is_repeated_key(e: &serde_json::Error) -> bool {
    e.to_string().contains(KEY_GIVEN_TWICE)
}

/// The entries of a map, refusing a key given twice: JSON leaves it to the reader, and a map
/// would keep the last value, dropping the first without a word.
fn unique_entries<'de, A: MapAccess<'de>>(mut map: A) -> Result<Props, A::Error> {
    let mut out = BTreeMap::new();
    while let Some((k, v)) = map.next_entry::<String, Value>()? {
        if out.contains_key(&k) {
            return Err(key_given_twice(&k));
        }
        out.insert(k, v);
    }
    Ok(out)
}

/// The refusal of `key` given twice in one JSON object ([`is_repeated_key`] knows it).
pub(crate) fn key_given_twice<E: de::Error>(key: &str) -> E {
    E::custom(format!(
        "key {} {KEY_GIVEN_TWICE}; give each key once",
        crate::error::quoted_excerpt(key)
    ))
}

/// Reads an `Option<f32>` salience, meant to be in [0, 1]: a number too
/// large for an `f32` is refused as it was written, where the cast had made it `inf` and the
/// range check then named a value no one gave (helper-115: "inf is outside [0, 1]" for
/// `1e308`). The range itself is checked where the value is applied
/// (`projection::check_unit`). A binary encoding (the log's) gives the `f32` as it is.
pub(crate) fn unit_salience<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    unit_value(d, "salience")
}

/// [`unit_salience`] for a confidence.
pub(crate) fn unit_confidence<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    unit_value(d, "confidence")
}

/// [`unit_salience`] of the value `name` says (the message names it: within an assertion the
/// error's path ends at the assertion).
fn unit_value<'de, D: Deserializer<'de>>(
    d: D,
    name: &'static str,
) -> Result<Option<f32>, D::Error> {
    struct Unit(&'static str);
    impl serde::de::Visitor<'_> for Unit {
        type Value = f32;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number in [0, 1]")
        }
        fn visit_f32<E: serde::de::Error>(self, v: f32) -> Result<f32, E> {
            Ok(v)
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<f32, E> {
            let narrowed = v as f32;
            if v.is_finite() && !narrowed.is_finite() {
                return Err(E::custom(format!(
                    "a {} of {v:e} is outside [0, 1]",
                    self.0
                )));
            }
            Ok(narrowed)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<f32, E> {
            Ok(v as f32)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<f32, E> {
            Ok(v as f32)
        }
    }
    struct MaybeUnit(&'static str);
    impl<'de> serde::de::Visitor<'de> for MaybeUnit {
        type Value = Option<f32>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number in [0, 1], or null")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Option<f32>, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<f32>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<f32>, D::Error> {
            d.deserialize_f32(Unit(self.0)).map(Some)
        }
    }
    d.deserialize_option(MaybeUnit(name))
}

/// Reads an upsert's `props` as [`unique_entries`].
fn unique_props<'de, D: Deserializer<'de>>(d: D) -> Result<Props, D::Error> {
    struct PropsVisitor;
    impl<'de> Visitor<'de> for PropsVisitor {
        type Value = Props;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of properties")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Props, A::Error> {
            unique_entries(map)
        }
    }
    d.deserialize_map(PropsVisitor)
}

/// Where something is in the block world: a chunk, and optionally the exact block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub cx: i32,
    pub cz: i32,
    pub block: Option<[i32; 3]>,
}

/// A node of the semantic graph, as derived from the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    /// The caller's stable key ("home_base", "p00042", "ent:barack obama").
    pub key: String,
    /// Open set: Place, NPC, Item, Region, Bot, Entity, Passage, ...
    pub label: String,
    pub name: String,
    pub aliases: Vec<String>,
    pub props: Props,
    pub anchor: Option<Anchor>,
    pub salience: f32,
    pub pinned: bool,
    /// World time of the first event that asserted the node.
    pub created: i64,
    /// World time of the last event that asserted the node.
    pub updated: i64,
}

#[cfg(test)]
impl Node {
    /// A node with only an id, a key and a label: what unit tests of the stores need.
    pub(crate) fn bare(id: u32, key: &str, label: &str) -> Node {
        Node {
            id: NodeId(id),
            key: key.into(),
            label: label.into(),
            name: String::new(),
            aliases: Vec::new(),
            props: Props::new(),
            anchor: None,
            salience: 0.0,
            pinned: false,
            created: 0,
            updated: 0,
        }
    }
}

/// An edge of the semantic graph, as derived from the log. Its identity is
/// `(from, relation, to)`: asserting the same triple again re-confirms it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub id: EdgeId,
    pub from: NodeId,
    /// Open set: OFFERS, CONTAINS, SLEPT_AT, LOCATED_IN, ...
    pub relation: String,
    pub to: NodeId,
    pub props: Props,
    /// Belief in the edge, in [0, 1]; the latest assertion's value.
    pub confidence: f32,
    /// World-time validity; `None` is unbounded.
    pub valid_from: Option<i64>,
    pub valid_to: Option<i64>,
    /// Wall-clock ms at which the first supporting event was recorded.
    pub recorded: i64,
    /// World time of the latest supporting event.
    pub last_seen: i64,
    /// Sequence numbers of the events that asserted or re-confirmed the edge, oldest first.
    pub evidence: Vec<u64>,
    /// The highest salience of the events that asserted it (see `dynamics::salience`).
    pub salience: f32,
}

impl Edge {
    /// Whether the edge holds at world time `t`.
    pub fn valid_at(&self, t: i64) -> bool {
        self.valid_from.is_none_or(|f| f <= t) && self.valid_to.is_none_or(|u| t < u)
    }
}

/// Upsert of a node. Fields left `None` keep their current value (or the default on creation:
/// label `Entity`, name the first alias or else the key, salience 0.5);
/// aliases are added to the existing set (not the name: a name given that is an alias takes
/// it out of them); properties are merged key by key, a `null` value removing the key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct NodeUpsert {
    pub key: String,
    pub label: Option<String>,
    pub name: Option<String>,
    pub aliases: Vec<String>,
    #[serde(deserialize_with = "unique_props")]
    pub props: Props,
    pub anchor: Option<Anchor>,
    #[serde(deserialize_with = "unit_salience")]
    pub salience: Option<f32>,
    pub pinned: Option<bool>,
}

/// Upsert of an edge identified by `(from, relation, to)` (node keys). Like [`NodeUpsert`],
/// `None` keeps the current value; each upsert adds its event to the edge's evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct EdgeUpsert {
    pub from: String,
    #[serde(alias = "rel")]
    pub relation: String,
    pub to: String,
    #[serde(deserialize_with = "unit_confidence")]
    pub confidence: Option<f32>,
    #[serde(deserialize_with = "unique_props")]
    pub props: Props,
    pub valid_from: Option<i64>,
    pub valid_to: Option<i64>,
    /// When the fact was last seen, where not at its event's time (default): a summary, dated
    /// at the start of its range, restates each fact as of the last of its events that did.
    /// An edge's `last_seen` is the latest of its upserts'.
    pub last_seen: Option<i64>,
}

/// A change to the graph carried by an event.
///
/// Retraction says an assertion was wrong and removes it; a fact that *stopped* holding is an
/// upsert that sets `valid_to`, so its history stays queryable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Assertion {
    UpsertNode(NodeUpsert),
    UpsertEdge(EdgeUpsert),
    /// Removes the node and every edge incident to it.
    RetractNode {
        key: String,
    },
    RetractEdge {
        from: String,
        relation: String,
        to: String,
    },
}

/// An event as submitted: everything but the sequence number and record time, which the store
/// assigns when it appends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventDraft {
    pub ts: i64,
    pub actor: String,
    pub place: Option<String>,
    pub anchor: Option<Anchor>,
    pub kind: String,
    pub payload: Value,
    /// How much the event matters, in [0, 1]; `None` lets the store score it
    /// (`dynamics::salience`) when it is ingested.
    #[serde(default, deserialize_with = "unit_salience")]
    pub salience: Option<f32>,
    /// Ids of the observations (or source documents) the event rests on.
    pub evidence: Vec<String>,
    pub assertions: Vec<Assertion>,
    /// A caller's key for this event: a draft whose key the store already holds is skipped,
    /// so a retried batch is applied once (see [`crate::Store::ingest`]). Keys starting with
    /// `loci:` ([`crate::store::STORE_KEY_PREFIX`]) are the store's own and refused.
    pub idempotency_key: Option<String>,
}

/// The indexed text of an event (see [`Event::text`]).
fn event_text(kind: &str, actor: &str, place: Option<&str>, payload: &Value) -> String {
    if kind == kinds::USAGE {
        // Bookkeeping: the keys it lists are not something the agent saw or did, and must not
        // make a search for a name find it.
        return kind.to_string();
    }
    let mut out = format!("{kind} {actor}");
    if let Some(p) = place {
        out.push(' ');
        out.push_str(p);
    }
    payload.collect_text(&mut out);
    out
}

impl EventDraft {
    /// The text the event will be indexed with.
    pub fn text(&self) -> String {
        event_text(
            &self.kind,
            &self.actor,
            self.place.as_deref(),
            &self.payload,
        )
    }

    /// A draft with the given time, actor and kind, and nothing else.
    pub fn new(ts: i64, actor: impl Into<String>, kind: impl Into<String>) -> Self {
        EventDraft {
            ts,
            actor: actor.into(),
            place: None,
            anchor: None,
            kind: kind.into(),
            payload: Value::Null,
            salience: None,
            evidence: Vec::new(),
            assertions: Vec::new(),
            idempotency_key: None,
        }
    }
}

/// An event of the append-only log: the source of truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the log, from 1, without gaps.
    pub seq: u64,
    /// Wall-clock ms at which the store appended it.
    pub recorded_at: i64,
    pub ts: i64,
    pub actor: String,
    pub place: Option<String>,
    pub anchor: Option<Anchor>,
    pub kind: String,
    pub payload: Value,
    pub salience: f32,
    pub evidence: Vec<String>,
    pub assertions: Vec<Assertion>,
    /// The key the event was submitted with, if any (at most one event of a store has it).
    pub idempotency_key: Option<String>,
}

impl Event {
    pub(crate) fn from_draft(seq: u64, recorded_at: i64, d: EventDraft) -> Self {
        Event {
            seq,
            recorded_at,
            ts: d.ts,
            actor: d.actor,
            place: d.place,
            anchor: d.anchor,
            kind: d.kind,
            payload: d.payload,
            // Scored by the store before an event is made; 0.5 only for a caller that builds
            // events itself.
            salience: d.salience.unwrap_or(0.5),
            evidence: d.evidence,
            assertions: d.assertions,
            idempotency_key: d.idempotency_key,
        }
    }

    /// The text the full-text index holds for this event: kind, actor, place and payload strings.
    pub fn text(&self) -> String {
        event_text(
            &self.kind,
            &self.actor,
            self.place.as_deref(),
            &self.payload,
        )
    }
}

/// Longest node key, event actor or place reference, in bytes. Keys are terms of the full-text
/// index, whose terms must stay under 65,529 bytes; an over-long key would be dropped there
/// silently, so it is refused at ingest instead, with room to spare.
pub const MAX_KEY_BYTES: usize = 1024;
/// Longest node name or alias, in bytes: a bound on what a node record holds (a name's
/// lookup form is hashed for the full-text index, so the index's term limit does not bind).
pub const MAX_NAME_BYTES: usize = 4096;
/// Longest label, relation or event kind, in bytes.
pub const MAX_LABEL_BYTES: usize = 256;

/// Normalises an entity name for resolution: lowercase, punctuation dropped, whitespace folded.
/// "The  U.S. Army" and "the us army" resolve to the same node.
pub fn normalize_name(name: &str) -> String {
    use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};
    let mut out = String::with_capacity(name.len());
    let mut pending_space = false;
    // Composed first, so that an accent typed as a combining mark joins its letter; a mark
    // left (of a script without precomposed letters) stays with the word it follows. ASCII
    // is composed already (every node's name passes here in a bulk load).
    let composed: std::borrow::Cow<'_, str> = if name.is_ascii() {
        name.into()
    } else {
        name.nfc().collect::<String>().into()
    };
    for c in composed.chars() {
        if is_combining_mark(c) && !pending_space && !out.is_empty() {
            out.push(c);
        } else if c.is_alphanumeric() {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.extend(c.to_lowercase());
        } else if c.is_whitespace() || c == '-' || c == '_' || c == '/' {
            pending_space = true;
        }
        // Other punctuation (periods, apostrophes, commas) is dropped without a break, so
        // "U.S." and "US" normalise alike.
    }
    out
}

/// A crude English singular of one normalised word or phrase (its last word): "sticks" ->
/// "stick", "berries" -> "berry", "boxes" -> "box". Enough to match item names and aliases
/// without a lexicon; words ending in "ss" or "us" are left alone.
pub fn singular(name: &str) -> String {
    let (head, last) = match name.rsplit_once(' ') {
        Some((h, l)) => (Some(h), l),
        None => (None, name),
    };
    let one = if last.len() > 3 && last.ends_with("ies") {
        format!("{}y", &last[..last.len() - 3])
    } else if last.len() > 3
        && ["ches", "shes", "xes", "sses", "zes"]
            .iter()
            .any(|s| last.ends_with(s))
    {
        last[..last.len() - 2].to_string()
    } else if last.len() > 2
        && last.ends_with('s')
        && !last.ends_with("ss")
        && !last.ends_with("us")
    {
        last[..last.len() - 1].to_string()
    } else {
        last.to_string()
    };
    match head {
        Some(h) => format!("{h} {one}"),
        None => one,
    }
}

/// Whether two names denote the same thing after normalisation and singularisation.
pub fn same_name(a: &str, b: &str) -> bool {
    singular(&normalize_name(a)) == singular(&normalize_name(b))
}

/// Node labels used by the synthetic world and built-in queries.
pub mod labels {
    pub const PLACE: &str = "Place";
    pub const NPC: &str = "NPC";
    pub const ITEM: &str = "Item";
    pub const REGION: &str = "Region";
    pub const BOT: &str = "Bot";
    pub const ENTITY: &str = "Entity";
    pub const PASSAGE: &str = "Passage";
}

/// Relations used by the synthetic world, the dataset loaders and built-in queries.
pub mod relations {
    pub const OFFERS: &str = "OFFERS";
    pub const CONTAINS: &str = "CONTAINS";
    pub const SLEPT_AT: &str = "SLEPT_AT";
    pub const LOCATED_IN: &str = "LOCATED_IN";
    pub const HOME: &str = "HOME";
    pub const PATH: &str = "PATH";
    pub const DIED_AT: &str = "DIED_AT";
    pub const DROPPED: &str = "DROPPED";
    pub const MENTIONS: &str = "MENTIONS";
    pub const SAME_AS: &str = "SAME_AS";
}

/// Event kinds used by the synthetic world and the dataset loaders.
pub mod kinds {
    pub const DISCOVERY: &str = "DISCOVERY";
    pub const TRADE: &str = "TRADE";
    pub const COMBAT: &str = "COMBAT";
    pub const DEATH: &str = "DEATH";
    pub const SLEEP: &str = "SLEEP";
    pub const BUILD: &str = "BUILD";
    pub const OBSERVATION: &str = "OBSERVATION";
    pub const IMPORT: &str = "IMPORT";
    pub const PASSAGE: &str = "PASSAGE";
    pub const EXTRACTION: &str = "EXTRACTION";
    /// Uses of items by reads (`dynamics::usage`); written only by the store.
    pub const USAGE: &str = "USAGE";
    /// A saved prompt context (`context`); written only by the store.
    pub const CONTEXT: &str = "CONTEXT";
    /// Pins and unpins nodes (`Store::pin`).
    pub const PIN: &str = "PIN";
    pub const UNPIN: &str = "UNPIN";

    /// Whether events of `kind` are the store's bookkeeping of reads (uses, saved contexts):
    /// not full-text indexed and not summarised.
    pub fn is_read_record(kind: &str) -> bool {
        kind == USAGE || kind == CONTEXT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_no_type_holds_are_found_with_their_path() {
        let at = |json: &str| inexact_integer(json);
        assert_eq!(at(r#"{"ts":1,"payload":{"x":1.5}}"#), None);
        // i64 and u64 hold these; a float written as one is a float.
        assert_eq!(at("[-9223372036854775808, 18446744073709551615]"), None);
        assert_eq!(at("[1e30, 18446744073709551616.0, 2E+40]"), None);
        assert_eq!(
            at(r#"{"ts":5,"payload":{"x":18446744073709551616}}"#),
            Some(("payload.x".into(), "18446744073709551616".into()))
        );
        assert_eq!(
            at(r#"{"a":[1,{"b\"c":"}]{,","n":[0,-9223372036854775809]}]}"#),
            Some(("a[1].n[1]".into(), "-9223372036854775809".into()))
        );
        assert_eq!(
            at("123456789012345678901234"),
            Some((String::new(), "123456789012345678901234".into()))
        );
        // Digits in a string are text.
        assert_eq!(at(r#"{"k":"123456789012345678901234"}"#), None);
    }

    #[test]
    fn value_is_plain_json_and_tagged_postcard() {
        let v: Value = serde_json::from_str(r#"{"a":[1,2.5,"x",null,true]}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"a":[1,2.5,"x",null,true]}"#
        );
        let bytes = postcard::to_allocvec(&v).unwrap();
        let back: Value = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, v);
    }

    /// A stored record (a node's properties, an event's payload) read from a damaged or
    /// crafted file: a value nested a hundred thousand lists deep had overflowed the stack
    /// of the thread decoding it, which aborts the process.
    #[test]
    fn a_stored_value_nested_too_deeply_is_an_error_not_a_stack_overflow() {
        // The tag of `List` (5), a length of 1, over and over; then a null.
        let mut bytes = [5u8, 1].repeat(100_000);
        bytes.push(0);
        let decoded = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || postcard::from_bytes::<Value>(&bytes).map_err(|e| e.to_string()))
            .unwrap()
            .join()
            .unwrap();
        assert!(decoded.is_err());
        // As deep as JSON input can be still reads back.
        let mut v = Value::Null;
        for _ in 0..200 {
            v = Value::List(vec![v]);
        }
        let bytes = postcard::to_allocvec(&v).unwrap();
        assert_eq!(postcard::from_bytes::<Value>(&bytes).unwrap(), v);
    }

    #[test]
    fn names_normalise() {
        assert_eq!(normalize_name("  The U.S.  Army "), "the us army");
        assert_eq!(normalize_name("Saint-Louis"), "saint louis");
        assert_eq!(normalize_name("O'Brien"), "obrien");
        assert_eq!(normalize_name("..."), "");
    }

    /// An accent typed as its own combining mark names what the precomposed letter names:
    /// the mark had been dropped (not alphanumeric), so "Cafe\u{301}" read as "cafe" and a
    /// query for "Café" found neither (a helper's probe). Marks of scripts that have no
    /// precomposed letters stay with their word.
    #[test]
    fn names_normalise_alike_however_their_accents_are_encoded() {
        assert_eq!(normalize_name("Cafe\u{301} Rouge"), "café rouge");
        assert_eq!(normalize_name("Caf\u{e9} Rouge"), "café rouge");
        assert_ne!(normalize_name("Café"), normalize_name("Cafe"));
        assert_eq!(normalize_name("हिन्दी"), "हिन्दी");
        assert_eq!(normalize_name("- \u{301}abc"), "abc");
    }

    #[test]
    fn singulars() {
        for (p, s) in [
            ("sticks", "stick"),
            ("berries", "berry"),
            ("boxes", "box"),
            ("iron ingots", "iron ingot"),
            ("glass", "glass"),
            ("cactus", "cactus"),
            ("torch", "torch"),
            ("torches", "torch"),
        ] {
            assert_eq!(singular(p), s);
        }
        assert!(same_name("Sticks", "stick"));
        assert!(!same_name("stick", "stack"));
    }
}
