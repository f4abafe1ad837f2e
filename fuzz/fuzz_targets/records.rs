//! The record decoder on arbitrary frame payloads: it must stop (Ok(None) or Err) without
//! panicking, consuming at least one byte per record.
#![no_main]
use libfuzzer_sys::fuzz_target;
use recorder::buffer::Decoder;

fuzz_target!(|data: &[u8]| {
    let first = data
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
    let mut d = Decoder::new(data, first);
    let mut n = 0usize;
    while let Ok(Some(_)) = d.next_record() {
        n += 1;
        assert!(n <= data.len(), "more records than bytes");
    }
});
