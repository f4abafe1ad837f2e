//! `shimlog stats`.
#[derive(clap::Args)]
pub struct Args {
    #[arg(required = true)]
    pub logs: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> Result<i32, String> {
    let r = crate::open::open(&a.logs[0])?;
    let t = std::time::Instant::now();
    let mut n = 0u64; let mut x = 0u64;
    for e in r.events() { n += 1; x = x.wrapping_add(e.ptr ^ e.size); }
    let s = t.elapsed().as_secs_f64();
    println!("{n} events {x} in {s:.3}s = {:.1} M/s", n as f64 / s / 1e6);
    Ok(0)
}
