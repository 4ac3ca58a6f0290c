//! The report's tables as Arrow, handed to Python through the Arrow PyCapsule interface
//! (`__arrow_c_stream__`), so that no Python object is built per row.
//!
//! Generic on purpose: a *table* is any top-level list of flat records in the report's
//! JSON (the same rule as `vcpulab.report.is_table`), so tables the core adds later
//! (locks, IPIs, ...) cross without code here. Column types are inferred from the values:
//! bool, int64 (uint64 when a value does not fit), float64 (any non-integer number),
//! utf8; a column with no value at all is of Arrow's null type. Every column is nullable
//! (serde's `Option` fields write `null`).

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, UInt64Builder,
};
use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{new_null_array, ArrayRef, RecordBatch, RecordBatchIterator, RecordBatchOptions};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use serde_json::Number;
use std::fmt;
use std::sync::Arc;

/// A JSON value that keeps the order of object keys (serde_json's `Value` sorts them
/// unless its `preserve_order` feature is on, which would also change the core's build).
#[derive(Clone, Debug, PartialEq)]
pub enum OVal {
    Null,
    Bool(bool),
    Num(Number),
    Str(String),
    Arr(Vec<OVal>),
    Obj(Vec<(String, OVal)>),
}

impl OVal {
    fn is_scalar(&self) -> bool {
        !matches!(self, OVal::Arr(_) | OVal::Obj(_))
    }

    /// A list of flat records (an empty list counts: a table with no rows).
    fn is_table(&self) -> bool {
        match self {
            OVal::Arr(rows) => rows.iter().all(|r| match r {
                OVal::Obj(fields) => fields.iter().all(|(_, v)| v.is_scalar()),
                _ => false,
            }),
            _ => false,
        }
    }
}

impl<'de> Deserialize<'de> for OVal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OVal, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OVal;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<OVal, E> {
                Ok(OVal::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<OVal, E> {
                Ok(OVal::Num(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<OVal, E> {
                Ok(OVal::Num(n.into()))
            }
            fn visit_f64<E>(self, x: f64) -> Result<OVal, E> {
                Ok(Number::from_f64(x).map_or(OVal::Null, OVal::Num))
            }
            fn visit_str<E>(self, s: &str) -> Result<OVal, E> {
                Ok(OVal::Str(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<OVal, E> {
                Ok(OVal::Str(s))
            }
            fn visit_unit<E>(self) -> Result<OVal, E> {
                Ok(OVal::Null)
            }
            fn visit_none<E>(self) -> Result<OVal, E> {
                Ok(OVal::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<OVal, D::Error> {
                OVal::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OVal, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(v) = seq.next_element()? {
                    out.push(v);
                }
                Ok(OVal::Arr(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OVal, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((k, v)) = map.next_entry::<String, OVal>()? {
                    out.push((k, v));
                }
                Ok(OVal::Obj(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for OVal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OVal::Null => s.serialize_unit(),
            OVal::Bool(b) => s.serialize_bool(*b),
            OVal::Num(n) => n.serialize(s),
            OVal::Str(x) => s.serialize_str(x),
            OVal::Arr(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            OVal::Obj(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Int,
    UInt,
    Float,
    Utf8,
}

fn kind_of(v: &OVal) -> Kind {
    match v {
        OVal::Null => Kind::Null,
        OVal::Bool(_) => Kind::Bool,
        OVal::Num(n) if n.is_i64() => Kind::Int,
        OVal::Num(n) if n.is_u64() => Kind::UInt,
        OVal::Num(_) => Kind::Float,
        _ => Kind::Utf8,
    }
}

/// The narrowest type that holds both; a mix that no number type holds becomes text.
fn unify(a: Kind, b: Kind) -> Kind {
    use Kind::*;
    match (a, b) {
        (x, y) if x == y => x,
        (Null, x) | (x, Null) => x,
        (Int, UInt) | (UInt, Int) => UInt,
        (Int | UInt | Float, Int | UInt | Float) => Float,
        _ => Utf8,
    }
}

fn as_text(v: &OVal) -> String {
    match v {
        OVal::Str(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn column(kind: Kind, values: &[Option<&OVal>]) -> (DataType, ArrayRef) {
    let n = values.len();
    fn num(v: Option<&OVal>) -> Option<&Number> {
        match v {
            Some(OVal::Num(x)) => Some(x),
            _ => None,
        }
    }
    match kind {
        Kind::Null => (DataType::Null, new_null_array(&DataType::Null, n)),
        Kind::Bool => {
            let mut b = BooleanBuilder::with_capacity(n);
            for v in values {
                b.append_option(match v {
                    Some(OVal::Bool(x)) => Some(*x),
                    _ => None,
                });
            }
            (DataType::Boolean, Arc::new(b.finish()))
        }
        Kind::Int => {
            let mut b = Int64Builder::with_capacity(n);
            for v in values {
                b.append_option(num(*v).and_then(Number::as_i64));
            }
            (DataType::Int64, Arc::new(b.finish()))
        }
        Kind::UInt => {
            // A negative value would have made the column float: every value fits u64.
            let mut b = UInt64Builder::with_capacity(n);
            for v in values {
                b.append_option(num(*v).and_then(Number::as_u64));
            }
            (DataType::UInt64, Arc::new(b.finish()))
        }
        Kind::Float => {
            let mut b = Float64Builder::with_capacity(n);
            for v in values {
                b.append_option(num(*v).and_then(Number::as_f64));
            }
            (DataType::Float64, Arc::new(b.finish()))
        }
        Kind::Utf8 => {
            let mut b = StringBuilder::with_capacity(n, n * 8);
            for v in values {
                match v {
                    None | Some(OVal::Null) => b.append_null(),
                    Some(x) => b.append_value(as_text(x)),
                }
            }
            (DataType::Utf8, Arc::new(b.finish()))
        }
    }
}

/// One table of flat records as a record batch; columns in first-seen key order. A
/// column null in every row takes the type the core declares for it
/// (`metrics::columns::NULLABLE`), so two runs' tables share one schema.
pub fn table_batch(table: &str, rows: &[OVal]) -> Result<RecordBatch, ArrowError> {
    let records: Vec<&[(String, OVal)]> = rows
        .iter()
        .filter_map(|r| match r {
            OVal::Obj(f) => Some(f.as_slice()),
            _ => None,
        })
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for rec in &records {
        for (k, _) in rec.iter() {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    let mut fields = Vec::with_capacity(names.len());
    let mut arrays = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        // Rows of one serde struct have the same keys in the same order: try the
        // position first, search only when a row differs.
        let values: Vec<Option<&OVal>> = records
            .iter()
            .map(|rec| match rec.get(i) {
                Some((k, v)) if k == name => Some(v),
                _ => rec.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            })
            .collect();
        let mut kind = values
            .iter()
            .flatten()
            .fold(Kind::Null, |acc, v| unify(acc, kind_of(v)));
        if kind == Kind::Null {
            use vcpulab_core::metrics::columns::{nullable_kind, ValueKind};
            kind = match nullable_kind(table, name) {
                Some(ValueKind::Int) => Kind::Int,
                Some(ValueKind::Float) => Kind::Float,
                None => Kind::Null,
            };
        }
        let (dt, array) = column(kind, &values);
        fields.push(Field::new(*name, dt, true));
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    let options = RecordBatchOptions::new().with_row_count(Some(records.len()));
    RecordBatch::try_new_with_options(schema, arrays, &options)
}

/// The report split for Python.
#[derive(Debug)]
pub struct SplitReport {
    /// The report without its tables and its histograms: JSON in the core's key order,
    /// each value as the report wrote it.
    pub scalars: String,
    /// The `histograms` value's JSON as the report wrote it (None: the report has none).
    /// Handed over unparsed: a host of a thousand VMs has ~10 MB of them, which Python
    /// parses only if they are read (`vcpulab.report.Report`).
    pub histograms: Option<String>,
    /// Each table as a record batch, in report order.
    pub tables: Vec<(String, RecordBatch)>,
}

/// The report's key for its latency histograms, which cross to Python as text.
const HISTOGRAMS: &str = "histograms";

/// The report's top level: its keys in order, each value's JSON text unparsed.
struct TopLevel<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TopLevel<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(TopLevel(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The report without its histograms, and the histograms' JSON (None: it has none), both
/// as written: the human summary needs all but the histograms, ~10 MB of a 1,024-VM
/// host's report.
pub fn split_histograms(json: &str) -> Result<(String, Option<String>), String> {
    let top = parse_top(json)?;
    let mut rest = String::with_capacity(json.len());
    rest.push('{');
    let mut histograms = None;
    for (key, raw) in top.0 {
        if key == HISTOGRAMS {
            histograms = Some(raw.get().to_owned());
        } else {
            push_entry(&mut rest, &key, raw.get())?;
        }
    }
    rest.push('}');
    Ok((rest, histograms))
}

fn parse_top(json: &str) -> Result<TopLevel<'_>, String> {
    serde_json::from_str(json).map_err(|e| {
        if e.classify() == serde_json::error::Category::Data {
            "the report is not a JSON object".to_string()
        } else {
            format!("bad report JSON: {e}")
        }
    })
}

/// Appends `"key":value` to an object being written (after `{`).
fn push_entry(out: &mut String, key: &str, value: &str) -> Result<(), String> {
    if !out.ends_with('{') {
        out.push(',');
    }
    out.push_str(&serde_json::to_string(key).map_err(|e| e.to_string())?);
    out.push(':');
    out.push_str(value);
    Ok(())
}

/// Splits a report: its tables become record batches, its histograms stay JSON text,
/// and everything else passes through as written. Only the arrays at the top level are
/// parsed (a table is one).
pub fn split_report(json: &str) -> Result<SplitReport, String> {
    let top = parse_top(json)?;
    let mut scalars = String::with_capacity(json.len().min(1 << 16));
    scalars.push('{');
    let mut histograms = None;
    let mut tables = Vec::new();
    for (key, raw) in top.0 {
        let text = raw.get();
        if key == HISTOGRAMS {
            histograms = Some(text.to_owned());
            continue;
        }
        if text.starts_with('[') {
            let value: OVal =
                serde_json::from_str(text).map_err(|e| format!("bad report JSON: {e}"))?;
            if let OVal::Arr(rows) = &value {
                if value.is_table() {
                    let batch = table_batch(&key, rows).map_err(|e| format!("table {key}: {e}"))?;
                    tables.push((key, batch));
                    continue;
                }
            }
        }
        push_entry(&mut scalars, &key, text)?;
    }
    scalars.push('}');
    Ok(SplitReport {
        scalars,
        histograms,
        tables,
    })
}

/// One table of the report, exported through the Arrow PyCapsule interface:
/// `pyarrow.table(t)` (or any Arrow library) imports it without copying per row.
#[pyclass(frozen, module = "vcpulab._core", name = "ArrowTable")]
pub struct ArrowTable {
    batch: RecordBatch,
}

impl ArrowTable {
    pub fn new(batch: RecordBatch) -> ArrowTable {
        ArrowTable { batch }
    }
}

#[pymethods]
impl ArrowTable {
    /// An ArrowArrayStream capsule. A requested schema is not honoured (the spec lets a
    /// producer ignore it); consumers cast themselves.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let schema: SchemaRef = self.batch.schema();
        let reader = RecordBatchIterator::new(vec![Ok(self.batch.clone())], schema);
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.batch.schema().as_ref())
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    fn __repr__(&self) -> String {
        let cols: Vec<String> = self
            .batch
            .schema()
            .fields()
            .iter()
            .map(|f| format!("{}: {}", f.name(), f.data_type()))
            .collect();
        format!(
            "<ArrowTable rows={} [{}]>",
            self.batch.num_rows(),
            cols.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Float64Array, Int64Array, StringArray};

    #[test]
    fn histograms_come_apart_as_written() {
        let json = r#"{"a":1,"histograms":{"h": {"count": 1}},"t":[{"x":1}],"k\"":2}"#;
        let (rest, hists) = split_histograms(json).unwrap();
        assert_eq!(rest, r#"{"a":1,"t":[{"x":1}],"k\"":2}"#);
        assert_eq!(hists.as_deref(), Some(r#"{"h": {"count": 1}}"#));
        assert_eq!(split_histograms("{}").unwrap(), ("{}".to_string(), None));
        assert!(split_histograms("[]").is_err());
    }

    #[test]
    fn tables_keep_key_order_types_and_nulls() {
        let json = r#"{"schema":1,"scenario":{"name":"x","seed":3},
            "vms":[{"vm":"a","n":1,"x":0.5,"o":null,"b":true,"z":null},
                   {"vm":"b","n":2,"x":2,"o":7,"b":false,"z":null}],
            "empty":[],"hist":{"h":{"buckets":[[0,1,2]]}},
            "histograms": {"wake/a": {"count": 2, "buckets": [[1, 2, 2]]}},"end_ns":10}"#;
        let SplitReport {
            scalars,
            histograms,
            tables,
        } = split_report(json).unwrap();
        assert_eq!(
            scalars,
            r#"{"schema":1,"scenario":{"name":"x","seed":3},"hist":{"h":{"buckets":[[0,1,2]]}},"end_ns":10}"#
        );
        // The histograms' text as written (spaces included), not re-serialized.
        assert_eq!(
            histograms.as_deref(),
            Some(r#"{"wake/a": {"count": 2, "buckets": [[1, 2, 2]]}}"#)
        );
        let names: Vec<&str> = tables.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["vms", "empty"]);
        let vms = &tables[0].1;
        let cols: Vec<String> = vms
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(cols, ["vm", "n", "x", "o", "b", "z"]);
        let types: Vec<DataType> = vms
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        use DataType::*;
        assert_eq!(types, [Utf8, Int64, Float64, Int64, Boolean, Null]);
        let vm = vms
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(vm.value(1), "b");
        let x = vms
            .column(2)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(x.value(1), 2.0);
        let o = vms.column(3).as_any().downcast_ref::<Int64Array>().unwrap();
        assert!(o.is_null(0));
        assert_eq!(o.value(1), 7);
        assert_eq!(tables[1].1.num_rows(), 0);
    }

    #[test]
    fn large_unsigned_values_widen_to_uint64() {
        let rows = vec![OVal::Obj(vec![("n".into(), OVal::Num(u64::MAX.into()))])];
        let batch = table_batch("t", &rows).unwrap();
        assert_eq!(batch.schema().field(0).data_type(), &DataType::UInt64);
    }

    #[test]
    fn an_all_null_column_takes_its_declared_type() {
        // No VM finished and none woke: the columns still have the types of runs where
        // they did, so the two runs' tables concatenate.
        let row = |vm: &str| {
            OVal::Obj(vec![
                ("vm".into(), OVal::Str(vm.into())),
                ("completion_ns".into(), OVal::Null),
                ("wake_latency_mean_ns".into(), OVal::Null),
                ("mystery".into(), OVal::Null),
            ])
        };
        let batch = table_batch("vms", &[row("a"), row("b")]).unwrap();
        let types: Vec<DataType> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        use DataType::*;
        assert_eq!(types, [Utf8, Int64, Float64, Null]);
    }
}
