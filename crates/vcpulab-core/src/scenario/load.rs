//! From text to a validated `Scenario`: parse, apply `--set` overrides, merge over the
//! preset, expand replicated VMs, deserialize (unknown keys are errors that name their
//! path), validate values.

use super::{platforms, presets, Scenario};
use std::fmt;
use toml::{Table, Value};

/// A bad scenario: names the key, the value and what is allowed, on one line.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    pub key: String,
    pub message: String,
}

impl ScenarioError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = self.message.replace('\n', " ");
        if self.key.is_empty() {
            write!(f, "{msg}")
        } else {
            write!(f, "{}: {msg}", self.key)
        }
    }
}
impl std::error::Error for ScenarioError {}

fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let before = &text[..pos.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, col)
}

/// Parses scenario text, applies overrides ("a.b.0.c=value") and the seed, and resolves
/// it into a validated scenario.
pub fn resolve(
    text: &str,
    overrides: &[String],
    seed: Option<u64>,
) -> Result<Scenario, ScenarioError> {
    let merged = merged_table(text, overrides, seed)?;
    let scheduler = merged
        .get("host")
        .and_then(Value::as_table)
        .and_then(|h| h.get("scheduler"))
        .and_then(Value::as_table)
        .cloned();
    let sc: Scenario = serde_path_to_error::deserialize(Value::Table(merged)).map_err(|e| {
        let path = e.path().to_string();
        if path == "host.scheduler" {
            if let Some(named) = scheduler.as_ref().and_then(scheduler_field_error) {
                return named;
            }
        }
        let message = e.into_inner().to_string();
        // (The table was consumed: built again, on this error path only.)
        if let Some(named) = merged_table(text, overrides, seed)
            .ok()
            .and_then(|m| enum_type_error(m, &path, &message))
        {
            return named;
        }
        let key = if path == "." { String::new() } else { path };
        ScenarioError::new(key, message)
    })?;
    super::validate::validate(&sc)?;
    Ok(sc)
}

/// The scenario's table with its overrides, seed, preset and platform profiles applied
/// and normalized, ready to deserialize.
fn merged_table(
    text: &str,
    overrides: &[String],
    seed: Option<u64>,
) -> Result<Table, ScenarioError> {
    let mut table: Table = text.parse().map_err(|e: toml::de::Error| {
        let where_ = e
            .span()
            .map(|s| {
                let (l, c) = line_col(text, s.start);
                format!(" at line {l}, column {c}")
            })
            .unwrap_or_default();
        ScenarioError::new("", format!("invalid TOML{where_}: {}", e.message().trim()))
    })?;
    for o in overrides {
        apply_override(&mut table, o)?;
    }
    if let Some(s) = seed {
        let s = i64::try_from(s).map_err(|_| {
            ScenarioError::new(
                "seed",
                format!("{s} is not allowed; expected 0 to {}", i64::MAX),
            )
        })?;
        table.insert("seed".into(), Value::Integer(s));
    }
    if let Some(preset) = default_preset(&table) {
        table.insert("preset".into(), Value::String(preset.into()));
    }
    let mut merged = match table.get("preset") {
        None => table,
        Some(Value::String(name)) => {
            let mut base = presets::resolve(name).map_err(|e| ScenarioError::new("preset", e))?;
            refuse_platform_conflict(name, &base, &table)?;
            deep_merge(&mut base, table);
            base
        }
        Some(v) => {
            return Err(ScenarioError::new(
                "preset",
                format!(
                    "{v} is not a preset name; allowed: {}",
                    presets::preset_names().join(", ")
                ),
            ));
        }
    };
    platforms::apply_host(&mut merged)?;
    normalize(&mut merged)?;
    Ok(merged)
}

/// A key whose allowed values are names given something else (`guest.spinlock = 3`):
/// the deserializer says only "invalid type: unit variant, expected string only". Asks
/// it again with a string in that place to learn the allowed names, and says those.
fn enum_type_error(mut probe: Table, path: &str, message: &str) -> Option<ScenarioError> {
    if !message.contains("variant") || path.is_empty() || path == "." {
        return None;
    }
    // serde_path_to_error writes `vm[0].guest.idle`: table keys and array indices.
    let mut segs = path.split(['.', '[', ']']).filter(|s| !s.is_empty());
    let mut slot = probe.get_mut(segs.next()?)?;
    for seg in segs {
        slot = match slot {
            Value::Table(t) => t.get_mut(seg)?,
            Value::Array(a) => a.get_mut(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    if slot.is_str() {
        return None;
    }
    let given = std::mem::replace(slot, Value::String("\u{1}".into()));
    let e = serde_path_to_error::deserialize::<_, Scenario>(Value::Table(probe)).err()?;
    let again = e.into_inner().to_string();
    let at = again.find("expected one of")?;
    let allowed = again[at..]
        .split(['\n', '\r'])
        .next()
        .unwrap_or(&again[at..])
        .split(" in `")
        .next()
        .unwrap_or(&again[at..])
        .trim();
    Some(ScenarioError::new(
        path,
        format!("{given} is not allowed; {allowed} (a name, in quotes)"),
    ))
}

/// A preset that names a host platform on a scenario that pins another: the scenario's
/// key would win and the preset's platform be silently dropped (a study scenario run
/// with `--set preset=kvm-modern` would still run its paper's host), so it is refused.
fn refuse_platform_conflict(
    name: &str,
    preset: &Table,
    scenario: &Table,
) -> Result<(), ScenarioError> {
    let platform = |t: &Table| {
        t.get("host")
            .and_then(Value::as_table)
            .and_then(|h| h.get("platform"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if let (Some(ours), Some(theirs)) = (platform(preset), platform(scenario)) {
        if ours != theirs {
            return Err(ScenarioError::new(
                "preset",
                format!(
                    "preset {name} runs on platform {ours}, but the scenario pins \
                     host.platform = {theirs}; set host.platform = {ours} too (e.g. --set \
                     host.platform={ours}), or choose a preset without a platform"
                ),
            ));
        }
    }
    Ok(())
}

/// A scenario that names neither a preset nor a host platform runs on today's platform:
/// `xen-modern` when its host scheduler is one of Xen's (credit, credit2, or the
/// co-schedulers built on credit), else `kvm-modern`. `preset = "kvm-default"` (or
/// `xen-default`) asks for the built-in pre-6.6 defaults instead.
pub fn default_preset(table: &Table) -> Option<&'static str> {
    if table.contains_key("preset") {
        return None;
    }
    let host = table.get("host").and_then(Value::as_table);
    if host.is_some_and(|h| h.contains_key("platform")) {
        return None;
    }
    let kind = host
        .and_then(|h| h.get("scheduler"))
        .and_then(Value::as_table)
        .and_then(|s| s.get("kind"))
        .and_then(Value::as_str);
    Some(match kind {
        Some("credit" | "credit2" | "gang" | "relaxed_co") => "xen-modern",
        _ => "kvm-modern",
    })
}

/// `pin = 2` and `pin = [0, 1]` mean what `pin = "2"` and `pin = ["0", "1"]` do: a
/// pCPU number is a one-CPU list.
fn pin_numbers_as_lists(vm: &mut Table) {
    let as_list = |v: &mut Value| {
        if let Value::Integer(n) = v {
            if *n >= 0 {
                *v = Value::String(n.to_string());
            }
        }
    };
    match vm.get_mut("pin") {
        Some(Value::Array(a)) => a.iter_mut().for_each(as_list),
        Some(v) => as_list(v),
        None => {}
    }
}

/// The field of `host.scheduler` a type error is in: the scheduler's parameters are
/// read through its `kind` tag, which hides the field from the error's path, so they
/// are read again on their own to name it.
fn scheduler_field_error(scheduler: &Table) -> Option<ScenarioError> {
    use super::{CfsParams, Credit2Params, CreditParams, EevdfParams, GangParams, RelaxedCoParams};
    fn field<T: serde::de::DeserializeOwned>(t: Table, kind: &str) -> Option<ScenarioError> {
        let e = serde_path_to_error::deserialize::<_, T>(Value::Table(t)).err()?;
        let path = e.path().to_string();
        let key = if path == "." {
            "host.scheduler".to_string()
        } else {
            format!("host.scheduler.{path}")
        };
        // The kind may come from a preset or platform the user did not look at.
        Some(ScenarioError::new(
            key,
            format!("{} (host.scheduler.kind = {kind})", e.into_inner()),
        ))
    }
    let mut t = scheduler.clone();
    let kind = t.remove("kind")?;
    let kind = kind.as_str()?;
    match kind {
        "cfs" => field::<CfsParams>(t, kind),
        "eevdf" => field::<EevdfParams>(t, kind),
        "credit" => field::<CreditParams>(t, kind),
        "credit2" => field::<Credit2Params>(t, kind),
        "gang" => field::<GangParams>(t, kind),
        "relaxed_co" => field::<RelaxedCoParams>(t, kind),
        _ => None,
    }
}

/// Fills what serde cannot default (the scheduler kind), copies the scenario-wide guest
/// table into every VM under the VM's own, and expands `count`.
fn normalize(t: &mut Table) -> Result<(), ScenarioError> {
    // PLE defaults follow the host: KVM (CFS) grows its window and does a directed
    // yield; Xen keeps a fixed window and yields.
    let host = t
        .entry("host")
        .or_insert_with(|| Value::Table(Table::new()));
    if let Value::Table(host) = host {
        let kind = match host.get_mut("scheduler") {
            Some(Value::Table(s)) => s
                .entry("kind")
                .or_insert_with(|| Value::String("cfs".into()))
                .as_str()
                .map(str::to_string),
            _ => Some("cfs".to_string()),
        };
        // Gang and relaxed co-scheduling are built on Xen credit's conventions.
        let xen = matches!(
            kind.as_deref(),
            Some("credit" | "credit2" | "gang" | "relaxed_co")
        );
        let ple = host
            .entry("ple")
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(ple) = ple {
            let policy = if xen { "fixed" } else { "kvm" };
            let action = if xen { "yield" } else { "directed-yield" };
            ple.entry("policy")
                .or_insert_with(|| Value::String(policy.into()));
            ple.entry("action")
                .or_insert_with(|| Value::String(action.into()));
        }
    }
    let global_guest = match t.get("guest") {
        None => Table::new(),
        Some(Value::Table(g)) => g.clone(),
        Some(v) => return Err(ScenarioError::new("guest", format!("{v} is not a table"))),
    };
    // A guest-kernel profile fills what the scenario-wide and the VM's own guest tables
    // leave unset (explicit keys win over the profile, wherever they are written).
    let global_kernel = global_guest.get("kernel").cloned();
    if global_kernel.is_some() {
        let mut g = global_guest.clone();
        let base = platforms::kernel_table("guest.kernel", global_kernel.as_ref())?;
        platforms::merge_under(&mut g, &base);
        t.insert("guest".into(), Value::Table(g));
    }
    let vms = match t.get_mut("vm") {
        None => return Ok(()),
        Some(Value::Array(a)) => std::mem::take(a),
        Some(v) => {
            return Err(ScenarioError::new(
                "vm",
                format!("{v} is not an array of tables; write [[vm]] sections"),
            ));
        }
    };
    let mut out = Vec::with_capacity(vms.len());
    for (i, vm) in vms.into_iter().enumerate() {
        let Value::Table(mut vm) = vm else {
            return Err(ScenarioError::new(format!("vm.{i}"), "is not a table"));
        };
        pin_numbers_as_lists(&mut vm);
        let mut guest = global_guest.clone();
        let mut kernel_key = "guest.kernel".to_string();
        match vm.remove("guest") {
            None => {}
            Some(Value::Table(own)) => {
                if own.contains_key("kernel") {
                    kernel_key = format!("vm.{i}.guest.kernel");
                }
                deep_merge(&mut guest, own)
            }
            Some(v) => {
                return Err(ScenarioError::new(
                    format!("vm.{i}.guest"),
                    format!("{v} is not a table"),
                ))
            }
        }
        let base = platforms::kernel_table(&kernel_key, guest.get("kernel"))?;
        platforms::merge_under(&mut guest, &base);
        vm.insert("guest".into(), Value::Table(guest));
        // 0 leaves the VM out: a sweep over the number of co-runners can start from
        // none (`--grid vm.1.count=0,1,2,3`).
        let count = match vm.remove("count") {
            None => 1,
            Some(Value::Integer(n)) if (0..=1024).contains(&n) => n as usize,
            Some(v) => {
                return Err(ScenarioError::new(
                    format!("vm.{i}.count"),
                    format!("{v} is not allowed; expected a whole number from 0 (leave the VM out) to 1024"),
                ));
            }
        };
        let base_name = match vm.get("name") {
            Some(Value::String(s)) => s.clone(),
            None => format!("vm{i}"),
            Some(v) => {
                return Err(ScenarioError::new(
                    format!("vm.{i}.name"),
                    format!("{v} is not allowed; expected a string"),
                ));
            }
        };
        for c in 0..count {
            let mut copy = vm.clone();
            let name = if count == 1 {
                base_name.clone()
            } else {
                format!("{base_name}-{c}")
            };
            copy.insert("name".into(), Value::String(name));
            out.push(Value::Table(copy));
        }
    }
    t.insert("vm".into(), Value::Array(out));
    Ok(())
}

/// Merges `over` into `base`: tables recursively, everything else replaced.
pub(super) fn deep_merge(base: &mut Table, over: Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => deep_merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn parse_value(raw: &str) -> Value {
    let raw = raw.trim();
    match format!("v = {raw}").parse::<Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| Value::String(raw.to_string())),
        Err(_) => Value::String(raw.to_string()),
    }
}

/// Applies one `key=value` override. Keys are dotted; numeric segments index arrays
/// (`vm.1.weight=512`, also written `vm[1].weight`); missing tables are created.
pub fn apply_override(t: &mut Table, spec: &str) -> Result<(), ScenarioError> {
    let Some((key, raw)) = spec.split_once('=') else {
        return Err(ScenarioError::new(
            spec,
            "an override must look like key=value (e.g. host.scheduler.slice_ms=10)",
        ));
    };
    let key = key.trim();
    let norm = key.replace('[', ".").replace(']', "");
    let segs: Vec<&str> = norm.split('.').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err(ScenarioError::new(key, "empty segment in override key"));
    }
    let value = parse_value(raw);
    set_path(t, &segs, 0, value)
}

fn set_path(t: &mut Table, segs: &[&str], depth: usize, value: Value) -> Result<(), ScenarioError> {
    let seg = segs[depth];
    if depth + 1 == segs.len() {
        t.insert(seg.to_string(), value);
        return Ok(());
    }
    let child = t
        .entry(seg.to_string())
        .or_insert_with(|| Value::Table(Table::new()));
    set_in_value(child, segs, depth + 1, value)
}

fn set_in_value(
    v: &mut Value,
    segs: &[&str],
    depth: usize,
    value: Value,
) -> Result<(), ScenarioError> {
    let here = segs[..depth].join(".");
    match v {
        Value::Table(tab) => set_path(tab, segs, depth, value),
        Value::Array(arr) => {
            let seg = segs[depth];
            let key = segs[..=depth].join(".");
            let idx: usize = seg
                .parse()
                .map_err(|_| ScenarioError::new(&key, format!("{seg:?} is not an array index")))?;
            let n = arr.len();
            let slot = arr.get_mut(idx).ok_or_else(|| {
                ScenarioError::new(
                    &key,
                    format!("index {idx} is out of range: {here} has {n} entries"),
                )
            })?;
            if depth + 1 == segs.len() {
                *slot = value;
                Ok(())
            } else {
                set_in_value(slot, segs, depth + 1, value)
            }
        }
        other => Err(ScenarioError::new(
            &here,
            format!(
                "cannot set {} inside {other}, which is not a table",
                segs[depth]
            ),
        )),
    }
}
