//! The runaway-loop guard counts micro-steps too: a long loop of instructions that become
//! micro-steps (an uncontended mutex taken and released) but take no simulated time
//! ends the run with the no-progress error, as a loop of counters does.

use vcpulab_core::{resolve, run};

fn ends_without_progress(body: &str) {
    let text = format!(
        "run = {{duration = \"10ms\"}}\n[[vm]]\nvcpus = 1\nworkload = {{model = \"program\", \
         group = [{{ops = [{{loop = {{n = 4611686018427387904, body = [{body}]}}}}]}}]}}\n"
    );
    let sc = resolve(&text, &[], None).unwrap_or_else(|e| panic!("{e}"));
    match run(&sc) {
        Ok(_) => panic!("a zero-time loop of [{body}] ran to the end"),
        Err(e) => assert!(
            e.to_string().contains("without time passing"),
            "unexpected error: {e}"
        ),
    }
}

#[test]
fn a_zero_time_loop_of_counters_is_stopped() {
    ends_without_progress("{count = 1}");
}

#[test]
fn a_zero_time_loop_of_micro_steps_is_stopped() {
    ends_without_progress("{lock = \"m\"}, {unlock = \"m\"}");
}
