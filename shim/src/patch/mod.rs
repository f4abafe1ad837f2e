//! Programs that bring their own allocator (linked into the executable, or non-standard
//! entry points in a library): LD_PRELOAD never sees their calls, so their entry points are
//! patched at start-up, from the shim's constructor, before the executable's constructors
//! and before any thread but the main one exists.
//!
//! - `detect`: which allocators the loaded files define, from their symbol tables;
//! - `entries`: the entry points by name and what each does;
//! - `hook`: the x86-64 patch (a jump to a wrapper, the original kept callable);
//! - `wrappers`: what a patched entry point runs, recorded or switched (`mozjemalloc`: the
//!   wrappers of Firefox's allocator's own entry points);
//! - `owner`: which allocator a block belongs to once switched;
//! - `native`: switched with nothing recorded, the busiest entry points call the backend directly;
//! - `later`: libraries loaded with dlopen after start-up, named when they bring an allocator.
//!
//! All entry points of every allocator found are patched, or none: whatever cannot be
//! patched safely leaves the program running exactly as it would without the shim, with one
//! line on stderr.
mod address;
mod detect;
mod entries;
mod hook;
pub mod later;
mod mi_api;
mod mozjemalloc;
mod native;
pub mod owner;
mod wrappers;

use crate::config::Choice;
use entries::{Kind, KINDS};
use recorder::format::OwnAllocator;
use shim_backend::Backend;
use std::sync::OnceLock;

static REPORT: OnceLock<Vec<OwnAllocator>> = OnceLock::new();

/// What the header says of the program's own allocators.
pub fn report() -> Vec<OwnAllocator> {
    REPORT.get().cloned().unwrap_or_default()
}

/// Called first thing at start-up: a switch needs the memory the program's allocator had
/// before the shim's backend made anything.
pub fn early(choice: Choice) {
    if matches!(choice, Choice::Switch(_)) {
        owner::snapshot();
    }
}

static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// `install` said on stderr why something was not patched or not switched.
static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One line on stderr from `install`, noted: the line that says why is the only one.
fn say(msg: &str) {
    SAID.store(true, std::sync::atomic::Ordering::Relaxed);
    crate::shared::say(msg);
}

/// What [`install`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Installed {
    /// The backend the program's own allocators were switched to, if they were.
    pub switched: Option<Backend>,
    /// A line on stderr said why something was left as it was (the caller adds none).
    pub said: bool,
}

/// Finds the program's own allocators and patches them: recorded in place (`Unset`, `Own`),
/// or served by the backend (`Switch`). `trace`: recording is on. Runs once (at the first
/// call when the program links an allocator library, whose standard names must be settled
/// before the first allocation; else from the constructor); returns the backend the
/// program's allocators were switched to, if they were, and whether it said why not.
pub fn install(choice: Choice, trace: bool) -> Installed {
    if INSTALLED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return Installed { switched: None, said: false };
    }
    let switched = install_once(choice, trace);
    Installed { switched, said: SAID.load(std::sync::atomic::Ordering::Relaxed) }
}

fn install_once(choice: Choice, trace: bool) -> Option<Backend> {
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
        return None;
    }
    let switch_to = match choice {
        Choice::Switch(b) => Some(b),
        _ => None,
    };
    if !trace && switch_to.is_none() {
        return None; // nothing to record and nothing to switch: no reason to touch the program
    }
    let scan = detect::scan();
    if let Some((file, fam)) = scan.stripped.first() {
        say(&format!(
            "shim: {file} is stripped (no .symtab) and brings its own {fam}, whose entry points cannot all be found: it runs as without the shim, its calls not recorded"
        ));
    }
    if scan.families.is_empty() {
        // SHIM_BACKEND=own in a program without an allocator of its own (a shell script's
        // children, say) is no mistake: glibc serves it, as it would without the shim.
        return None;
    }
    let done = patch_all(&scan.families, switch_to, trace);
    let report: Vec<OwnAllocator> = scan
        .families
        .iter()
        .map(|f| OwnAllocator {
            family: f.name.to_string(),
            prefix: f.prefix.clone(),
            version: match &done {
                Ok(mode) if mode.is_none() => version(f),
                _ => String::new(),
            },
            file: f.file.clone(),
            entry_points: f.entries.len() as u32,
            mode: match &done {
                Ok(Some(_)) => "switched".into(),
                Ok(None) => "recorded".into(),
                Err(_) => "untouched".into(),
            },
            note: match &done {
                Err(why) => why.clone(),
                Ok(_) if !f.unhandled.is_empty() => format!("not recorded: {}", f.unhandled.join(", ")),
                Ok(_) => String::new(),
            },
        })
        .collect();
    let _ = REPORT.set(report);
    done.ok().flatten()
}

/// Patches every family; Ok(backend it was switched to, if any), or why nothing was.
fn patch_all(
    families: &[detect::Family],
    switch_to: Option<Backend>,
    trace: bool,
) -> Result<Option<Backend>, String> {
    let first = &families[0];
    let what = format!("{} brings its own {}", first.file, first.name);
    let fail = |why: String| {
        say(&format!("shim: {what}, but {why}; it runs as without the shim, its calls not recorded"));
        Err(why)
    };
    if !cfg!(target_arch = "x86_64") {
        return fail("patching entry points is supported on x86-64 only".into());
    }
    if let Some(why) = families.iter().find_map(|f| f.problem.clone()) {
        return fail(why);
    }
    if threads() > 1 {
        return fail("other threads were already running when the shim started".into());
    }
    let mut switch_to = switch_to;
    if let Some(b) = switch_to {
        let blocker = families.iter().find(|f| !f.unhandled.is_empty());
        if let Some(f) = blocker {
            say(&format!(
                "shim: cannot switch {}'s {} to {}: it has entry points the shim does not serve ({}); recording its own allocator instead",
                f.file,
                f.name,
                b.name(),
                f.unhandled.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            ));
            switch_to = None;
        } else if !owner::taken() {
            say("shim: cannot switch the program's own allocator: its memory could not be read from /proc/self/maps; recording it instead");
            switch_to = None;
        }
    }
    let mut tr = hook::Trampolines::default();
    let mut next = [0usize; KINDS];
    let mut hooks = Vec::new();
    let mut originals: Vec<(Kind, usize, usize)> = Vec::new();
    for f in families {
        for e in &f.entries {
            let slot = next[e.kind as usize];
            if slot >= wrappers::SLOTS {
                tr.release();
                return fail(format!("it has more than {} entry points like {}", wrappers::SLOTS, e.name));
            }
            next[e.kind as usize] += 1;
            let target = match switch_to {
                // Nothing will ever be recorded (SHIM_TRACE=0): straight to the backend.
                Some(b) if !trace => native::address(&e.name, e.kind, slot, b),
                _ => address::wrapper(e.kind, slot),
            };
            match hook::prepare(e.addr, e.size, target, &mut tr) {
                Ok(h) => {
                    originals.push((e.kind, slot, h.original));
                    hooks.push(h);
                }
                Err(why) => {
                    tr.release();
                    return fail(format!("{} cannot be patched safely: {why}", e.name));
                }
            }
        }
    }
    for &(kind, slot, addr) in &originals {
        wrappers::set_original(kind, slot, addr);
    }
    if switch_to.is_some() {
        wrappers::set_switched();
        owner::activate();
    }
    if let Err(why) = hook::apply(&hooks, &mut tr) {
        tr.release();
        return fail(why);
    }
    Ok(switch_to)
}

/// Threads in this process now.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(1)
}

/// The allocator's version, asked of the allocator itself (recorded mode: it is the one
/// serving the program, so asking it changes nothing).
fn version(f: &detect::Family) -> String {
    let find = |name: &str| f.entries.iter().find(|e| e.name == name).map(|e| e.addr);
    unsafe {
        match f.name {
            "jemalloc" => {
                let Some(ctl) = find(&format!("{}mallctl", f.prefix)) else { return String::new() };
                let ctl: unsafe extern "C" fn(
                    *const libc::c_char,
                    *mut libc::c_void,
                    *mut usize,
                    *mut libc::c_void,
                    usize,
                ) -> i32 = core::mem::transmute(ctl);
                let mut v: *const libc::c_char = core::ptr::null();
                let mut len = core::mem::size_of::<*const libc::c_char>();
                let rc = ctl(
                    c"version".as_ptr(),
                    &mut v as *mut _ as *mut libc::c_void,
                    &mut len,
                    core::ptr::null_mut(),
                    0,
                );
                if rc != 0 || v.is_null() {
                    return String::new();
                }
                let s = core::ffi::CStr::from_ptr(v).to_string_lossy().into_owned();
                s.split('-').next().unwrap_or(&s).to_string()
            }
            "mimalloc" => {
                let p = libc::dlsym(libc::RTLD_DEFAULT, c"mi_version".as_ptr());
                if p.is_null() {
                    return String::new();
                }
                let v = core::mem::transmute::<*mut libc::c_void, unsafe extern "C" fn() -> i32>(p)();
                format!("{}.{}.{}", v / 100, (v / 10) % 10, v % 10)
            }
            "tcmalloc" => {
                let p = libc::dlsym(libc::RTLD_DEFAULT, c"tc_version".as_ptr());
                if p.is_null() {
                    return String::new();
                }
                let f: unsafe extern "C" fn(
                    *mut i32,
                    *mut i32,
                    *mut *const libc::c_char,
                ) -> *const libc::c_char = core::mem::transmute(p);
                let s = f(core::ptr::null_mut(), core::ptr::null_mut(), core::ptr::null_mut());
                if s.is_null() {
                    String::new()
                } else {
                    core::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
                }
            }
            _ => String::new(),
        }
    }
}
