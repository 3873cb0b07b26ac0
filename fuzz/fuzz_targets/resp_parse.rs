//! Fuzz target: the server's request parser on arbitrary bytes. It must never panic, never
//! claim more bytes than it was given, and return argument ranges inside the request it
//! consumed; a buffer it calls incomplete must stay incomplete or parse the same way when
//! more bytes arrive (no request is parsed differently because of where a read split it).

#![no_main]

use daisy_kv::resp::{parse, Limits, Parsed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lim = Limits {
        max_bulk_len: 1 << 16,
        max_multibulk_len: 1 << 12,
        max_inline_len: 1 << 10,
        ..Limits::default()
    };
    let mut args = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        match parse(&data[pos..], &mut args, &lim) {
            Parsed::Incomplete => {
                // Every prefix of an incomplete buffer is incomplete too (or an error that
                // the full buffer would also give from the same header).
                for cut in 0..data.len() - pos {
                    let mut a = Vec::new();
                    if let Parsed::Request { .. } = parse(&data[pos..pos + cut], &mut a, &lim) {
                        panic!("a prefix parsed as a request but the whole is incomplete");
                    }
                }
                break;
            }
            Parsed::Request { consumed } => {
                assert!(consumed > 0 && consumed <= data.len() - pos);
                for r in &args {
                    assert!(r.start <= r.end && r.end <= consumed);
                }
                pos += consumed;
            }
            Parsed::Error(e) => {
                assert!(e.starts_with("Protocol error"));
                break;
            }
        }
    }
});
