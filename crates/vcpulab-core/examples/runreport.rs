//! Runs one scenario and prints its report as JSON (for quick checks without the
//! Python front end). Usage: runreport <scenario.toml> [key=value ...]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, ov)) = args.split_first() else {
        eprintln!("usage: runreport <scenario.toml> [key=value ...]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let sc = vcpulab_core::resolve(&text, ov, None).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let r = vcpulab_core::run(&sc).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    println!("{}", serde_json::to_string(&r).expect("json"));
}
