//! The core's public entry points: scenario text in, report out.

use crate::metrics::report::{ModeRow, Report};
use crate::metrics::trace::TraceSink;
use crate::scenario::Mode;
use crate::scenario::{self, Scenario, ScenarioError};
use crate::sim::world::{StopCause, World};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Resolves scenario text with `key=value` overrides and an optional seed.
pub fn resolve(
    text: &str,
    overrides: &[String],
    seed: Option<u64>,
) -> Result<Scenario, ScenarioError> {
    scenario::resolve(text, overrides, seed)
}

/// The resolved scenario as TOML, preceded by comment lines that name the platform
/// profiles in use and every key they set (with the value in effect where the preset or
/// the scenario overrode it): what `vcpulab explain` prints.
pub fn explain(
    text: &str,
    overrides: &[String],
    seed: Option<u64>,
) -> Result<String, ScenarioError> {
    let sc = scenario::resolve(text, overrides, seed)?;
    // Whether the scenario (or an override) named a preset or a platform itself.
    let named: toml::Table = text.parse().unwrap_or_default();
    let overridden = overrides.iter().any(|o| {
        matches!(
            o.split_once('=').map(|(k, _)| k.trim()),
            Some("preset" | "host.platform")
        )
    });
    let default_note = match scenario::default_preset(&named).filter(|_| !overridden) {
        Some(p) => format!(
            "# no preset or platform named: today's platform, preset {p:?} (name `preset = \"kvm-default\"` for the built-in pre-6.6 defaults)\n"
        ),
        None => String::new(),
    };
    let toml_text = sc.to_toml();
    let table: toml::Table = toml_text.parse().map_err(|e| {
        ScenarioError::new("", format!("cannot re-read the resolved scenario: {e}"))
    })?;
    Ok(format!(
        "{default_note}{}{}{toml_text}",
        scenario::platforms::explain(&table),
        workload_params_explained(&sc)
    ))
}

/// Comment lines with every parameter of each VM's catalog model: the value in effect
/// (the scenario's, else the model's default) and what it means — the resolved
/// `[vm.workload.params]` table lists only what the scenario set.
fn workload_params_explained(sc: &Scenario) -> String {
    use crate::workload::catalog;
    let mut out = String::new();
    for (i, vm) in sc.vm.iter().enumerate() {
        let name = vm.name.clone().unwrap_or_else(|| format!("vm{i}"));
        let Some(info) = catalog::find(&vm.workload.model) else {
            continue;
        };
        if info.params.is_empty() {
            out.push_str(&format!(
                "# vm {name:?}: workload {:?} has no parameters\n",
                info.name
            ));
            continue;
        }
        out.push_str(&format!(
            "# vm {name:?}: workload {:?} parameters (value in effect, and what it means):\n",
            info.name
        ));
        for p in info.params {
            let origin = match vm.workload.params.get(p.name) {
                Some(v) => format!("{v}  (set; default {})", p.default),
                None => format!("{}  (default)", p.default),
            };
            out.push_str(&format!("#   params.{} = {origin} — {}\n", p.name, p.help));
        }
    }
    out
}

/// Runs a resolved scenario; the result depends only on the scenario (and its seed).
pub fn run(sc: &Scenario) -> Result<Report, ScenarioError> {
    run_traced(sc, None)
}

pub fn run_traced(
    sc: &Scenario,
    trace: Option<Box<dyn TraceSink>>,
) -> Result<Report, ScenarioError> {
    run_abortable(sc, trace, None)
}

/// The error of a run that did not reach its end (budget, no progress, abort).
fn unfinished(w: &World, cause: StopCause) -> Result<(), ScenarioError> {
    match cause {
        StopCause::AllFinished | StopCause::Duration => Ok(()),
        StopCause::EventBudget => Err(ScenarioError::new(
            "run.max_events",
            format!(
                "the run dispatched {} events (its budget) and reached only {} of simulated time; raise run.max_events or shorten run.duration",
                w.max_events, w.now
            ),
        )),
        StopCause::NoProgress(t) => Err(ScenarioError::new(
            "vm.workload",
            format!(
                "thread {} of VM {:?} ran {} instructions at simulated time {} without time passing (a loop whose body takes no time); give the loop a compute, sleep or io op",
                t.0,
                w.vms[w.threads[t.idx()].vm.idx()].name,
                crate::sim::world::MAX_ZERO_TIME_STEPS,
                w.now
            ),
        )),
        StopCause::Aborted => Err(ScenarioError::new(
            "run",
            format!("stopped at simulated time {} (interrupted or out of time)", w.now),
        )),
    }
}

/// `run_traced` that stops with an error when `abort` is raised from another thread
/// (checked every 4096 events).
pub fn run_abortable(
    sc: &Scenario,
    trace: Option<Box<dyn TraceSink>>,
    abort: Option<Arc<AtomicBool>>,
) -> Result<Report, ScenarioError> {
    if sc.run.mode == Mode::CacheStudy {
        if trace.is_some() {
            return Err(ScenarioError::new(
                "run.mode",
                "\"cache_study\" runs the LLC simulator, not the host engine: it has no trace; use run.mode = \"consolidated\"",
            ));
        }
        let (cfg, contexts) = crate::host::llc_study::from_scenario(sc)?;
        let rows = crate::host::llc_study::run_study(&cfg, &contexts)
            .map_err(|e| ScenarioError::new("host.cache.llc", e))?;
        return Ok(Report::of_cache_study(sc, rows));
    }
    if sc.host.cache.model == crate::scenario::CacheModel::Llc
        && sc.host.cache.llc.insertion != crate::host::llc_study::StudyPolicy::Mru
    {
        return Err(ScenarioError::new(
            "host.cache.llc.insertion",
            format!(
                "{:?}: whole-host runs use the LLC access profiles through the eviction-and-refetch model, which has no insertion position; allowed: \"mru\" (or run.mode = \"cache_study\")",
                sc.host.cache.llc.insertion.name()
            ),
        ));
    }
    // Equal-capped solo needs the focus VM's consolidated share first.
    let mut consolidated_share: Option<f64> = None;
    let main = if sc.run.mode == Mode::SoloCapped {
        let share = focus_share(sc, &abort)?;
        consolidated_share = Some(share);
        scenario::modes::derive_solo_capped(sc, share)?
    } else {
        scenario::modes::derive(sc, sc.run.mode)?
    };
    let mut w = World::new(&main)?;
    if let Some(t) = trace {
        w.set_trace(t);
    }
    w.abort = abort.clone();
    let cause = w.run();
    unfinished(&w, cause)?;
    // The hash names the scenario as given (the run may be a derived mode of it).
    let hash = crate::metrics::report::scenario_hash(sc);
    let mut report = Report::build(&main, &w, cause, hash);
    if !sc.run.compare.is_empty() {
        let focus = if sc.run.mode == Mode::Consolidated {
            scenario::modes::focus_index(sc)?
        } else {
            0
        };
        let base = report.vms[focus].clone();
        if sc.run.mode == Mode::Consolidated {
            consolidated_share = Some(base.cpu_share);
        }
        report.modes.push(ModeRow::of(sc.run.mode, &base, &base));
        for &m in &sc.run.compare {
            let s = if m == Mode::SoloCapped {
                let share = match consolidated_share {
                    Some(x) => x,
                    None => focus_share(sc, &abort)?,
                };
                scenario::modes::derive_solo_capped(sc, share)?
            } else {
                scenario::modes::derive(sc, m)?
            };
            let mut w = World::new(&s)?;
            w.abort = abort.clone();
            let cause = w.run();
            unfinished(&w, cause)?;
            let r = Report::build(&s, &w, cause, String::new());
            report.modes.push(ModeRow::of(m, &r.vms[0], &base));
        }
    }
    Ok(report)
}

/// The focus VM's share of all pCPU time when the scenario runs consolidated.
fn focus_share(sc: &Scenario, abort: &Option<Arc<AtomicBool>>) -> Result<f64, ScenarioError> {
    let s = scenario::modes::derive(sc, Mode::Consolidated)?;
    let f = scenario::modes::focus_index(sc)?;
    let mut w = World::new(&s)?;
    w.abort = abort.clone();
    let cause = w.run();
    unfinished(&w, cause)?;
    Ok(Report::build(&s, &w, cause, String::new()).vms[f].cpu_share)
}

/// (name, description) of every preset; a preset built on a base starts its description
/// with the chain it inherits, root first ("kvm-default > apple: ...").
pub fn presets() -> Vec<(String, String)> {
    scenario::PRESETS
        .iter()
        .map(|p| {
            let chain = scenario::preset_chain(p.name)
                .map(|c| c.iter().map(|q| q.name).collect::<Vec<_>>())
                .unwrap_or_default();
            let description = if chain.len() > 1 {
                format!("{}: {}", chain.join(" > "), p.description)
            } else {
                p.description.to_string()
            };
            (p.name.to_string(), description)
        })
        .collect()
}

/// (name, description) of every host platform profile (`host.platform`): the study it
/// serves, the hypervisor and its version, the CPU (marked "assumed" where the paper
/// does not give it), the host scheduler and guest kernel it pins, and its notes — what
/// a user checks before trusting, or changing with `--set`, a study's assumptions.
pub fn platforms() -> Vec<(String, String)> {
    use scenario::platforms::{Hypervisor, HOST_PLATFORMS};
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    HOST_PLATFORMS
        .iter()
        .map(|p| {
            let groups = match p.per_vm_groups {
                Some(true) => " (a task group per VM)",
                _ => "",
            };
            let ple = match p.hypervisor {
                Hypervisor::Kvm if p.ple_window_grows => "; PLE window grows and shrinks",
                Hypervisor::Kvm => "; PLE window fixed",
                Hypervisor::Xen => "",
            };
            let description = format!(
                "{}: {}; CPU {}; host scheduler {}{}; guest kernel {}; APICv {}; host halt \
                 polling {}{}. {}",
                p.study,
                p.version,
                p.cpu,
                p.scheduler,
                groups,
                p.guest_kernel,
                yes_no(p.apicv),
                yes_no(p.halt_poll),
                ple,
                p.notes
            );
            (p.name.to_string(), description)
        })
        .collect()
}

/// (name, description) of every guest kernel profile (`guest.kernel`): its version and
/// study, its scheduler, tick and preemption model, and its spinlocks.
pub fn kernels() -> Vec<(String, String)> {
    scenario::platforms::GUEST_KERNELS
        .iter()
        .map(|k| {
            let description = format!(
                "{}: {}; {}, HZ={}, {} preemption, {} spinlocks. {}",
                k.study, k.version, k.scheduler, k.tick_hz, k.preemption, k.spinlock, k.notes
            );
            (k.name.to_string(), description)
        })
        .collect()
}

/// (name, description) of every catalog workload model.
pub fn workloads() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = crate::workload::catalog::MODELS
        .iter()
        .map(|m| (m.name.to_string(), m.description.to_string()))
        .collect();
    v.push((
        "program".into(),
        "explicit thread groups running ops written in the scenario".into(),
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_and_kernel_is_listed_and_an_assumed_cpu_says_so() {
        let platforms = platforms();
        let names: Vec<&str> = platforms.iter().map(|(n, _)| n.as_str()).collect();
        let expected: Vec<&str> = scenario::platforms::HOST_PLATFORMS
            .iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, expected);
        let dcs = &platforms
            .iter()
            .find(|(n, _)| n == "kvm-3.2-wsm")
            .expect("listed")
            .1;
        assert!(dcs.starts_with("DCS"), "{dcs}");
        assert!(dcs.contains("CPU assumed Westmere-EP"), "{dcs}");
        assert!(dcs.contains("PLE window fixed"), "{dcs}");
        let kernels = kernels();
        assert_eq!(kernels.len(), scenario::platforms::GUEST_KERNELS.len());
        let modern = &kernels
            .iter()
            .find(|(n, _)| n == "linux-6.6")
            .expect("listed")
            .1;
        assert!(
            modern.contains("eevdf") && modern.contains("pv-qspinlock"),
            "{modern}"
        );
    }
}
