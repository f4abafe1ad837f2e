// Known call sites in Rust for itest/tests/stacks.rs, built by the test with rustc -O (with
// and without -C force-frame-pointers=yes) on the System allocator, which calls malloc:
// main -> a -> b makes 1000 blocks of 4096 bytes (freed at the end), main -> c makes 500
// blocks of 10000 bytes (never freed).
use std::hint::black_box;

#[inline(never)]
fn b(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n);
    v.push(1u8);
    black_box(v)
}

#[inline(never)]
fn a(keep: &mut Vec<Vec<u8>>) {
    for _ in 0..1000 {
        keep.push(b(4096));
    }
}

#[inline(never)]
fn c() {
    for _ in 0..500 {
        let mut v: Vec<u8> = Vec::with_capacity(10000);
        v.push(2);
        std::mem::forget(black_box(v));
    }
}

fn main() {
    let mut keep = Vec::with_capacity(1000);
    a(&mut keep);
    c();
    drop(black_box(keep));
    println!("done");
}
