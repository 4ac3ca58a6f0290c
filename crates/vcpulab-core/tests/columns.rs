//! Every column a report has is in the glossary (metrics/columns.rs): scenarios that
//! between them fill every table of the report.
use vcpulab_core::metrics::columns::{lookup, nullable_kind, ValueKind};
use vcpulab_core::{resolve, run};

const IPERF: &str = r#"
[run]
duration = "40ms"
[host]
pcpus = 1
[[vm]]
vcpus = 1
nic = { rate_mbps = 100, ring = 64 }
workload = { model = "iperf-udp" }
"#;

fn scenario(rel: &str) -> String {
    if rel.starts_with('\n') {
        return rel.to_string();
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

#[test]
fn every_report_column_is_in_the_glossary() {
    let cases: &[(&str, &[&str])] = &[
        ("gleaner/mysql.toml", &["run.duration=40ms"]),
        ("gleaner/consolidation.toml", &["run.duration=300ms"]),
        ("apple/pair.toml", &["run.duration=40ms"]),
        ("microslice/mixed.toml", &["run.duration=40ms"]),
        ("dcs/parsec-mix.toml", &["run.duration=40ms"]),
        ("cache/mix2.toml", &[]),
        (IPERF, &[]),
        (
            "examples/xen-slice-sweep.toml",
            &["run.duration=40ms", "run.compare=[\"dedicated\"]"],
        ),
    ];
    let mut tables_seen = std::collections::BTreeSet::new();
    let mut missing = Vec::new();
    let mut undeclared_nulls = Vec::new();
    let mut wrong_kind = Vec::new();
    for (file, overrides) in cases {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let sc = resolve(&scenario(file), &o, Some(1)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let report = run(&sc).unwrap_or_else(|e| panic!("{file}: {e}"));
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        let serde_json::Value::Object(top) = json else {
            panic!("a report is an object")
        };
        for (key, value) in &top {
            match value {
                // A list of messages (absent when empty), one report column.
                serde_json::Value::Array(_) if key == "warnings" => {
                    if lookup("report", key).is_none() {
                        missing.push(format!("report.{key} ({file})"));
                    }
                }
                serde_json::Value::Array(rows) => {
                    tables_seen.insert(key.clone());
                    for row in rows {
                        let mut cols = Vec::new();
                        flatten("", row, &mut cols);
                        for c in cols {
                            if lookup(key, &c).is_none() {
                                missing.push(format!("{key}.{c} ({file})"));
                            }
                            // Nulls only where declared, values of the declared type.
                            let v = &row[c.as_str()];
                            let declared = nullable_kind(key, &c);
                            match (v, declared) {
                                (serde_json::Value::Null, None) => {
                                    undeclared_nulls.push(format!("{key}.{c} ({file})"))
                                }
                                (serde_json::Value::Number(n), Some(ValueKind::Int))
                                    if !(n.is_u64() || n.is_i64()) =>
                                {
                                    wrong_kind.push(format!("{key}.{c} = {n} is not an integer"))
                                }
                                (serde_json::Value::Number(n), Some(ValueKind::Float))
                                    if !n.is_f64() =>
                                {
                                    wrong_kind.push(format!("{key}.{c} = {n} is not a float"))
                                }
                                _ => {}
                            }
                        }
                    }
                }
                serde_json::Value::Object(_) if key == "dcs" => {
                    let mut cols = Vec::new();
                    flatten("", value, &mut cols);
                    for c in cols {
                        if lookup("dcs", &c).is_none() {
                            missing.push(format!("dcs.{c} ({file})"));
                        }
                    }
                }
                _ => {
                    let mut cols = Vec::new();
                    flatten(key, value, &mut cols);
                    for c in cols {
                        if lookup("report", &c).is_none() {
                            missing.push(format!("report.{c} ({file})"));
                        }
                    }
                }
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "report columns without a glossary entry in metrics/columns.rs: {missing:?}"
    );
    undeclared_nulls.sort();
    undeclared_nulls.dedup();
    assert!(
        undeclared_nulls.is_empty(),
        "null report values not declared in metrics/columns.rs NULLABLE: {undeclared_nulls:?}"
    );
    assert!(wrong_kind.is_empty(), "{wrong_kind:?}");
    for t in [
        "vms",
        "vcpus",
        "pcpus",
        "locks",
        "latencies",
        "gleaner",
        "ple_epochs",
        "net",
        "llc",
        "runq_length",
        "modes",
    ] {
        assert!(
            tables_seen.contains(t),
            "no case fills table {t}: {tables_seen:?}"
        );
    }
}
