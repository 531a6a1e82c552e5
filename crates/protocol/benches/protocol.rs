//! The protocol crate's hot paths: parsing pipelined requests and encoding replies.
//!
//! `cargo bench -p latch-protocol`; throughput in bytes (parsing) or replies (encoding) per
//! second, so that a regression shows here before it shows in bench/compare.sh.

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use latch_protocol::{Reply, RequestLimits, RequestParser, Resp};

/// `count` pipelined commands as redis-benchmark sends them.
fn pipeline(count: usize, command: impl Fn(usize) -> Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count {
        let args = command(i);
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(&arg);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

fn parse_all(stream: &[u8]) -> usize {
    let mut parser = RequestParser::new();
    let limits = RequestLimits::default();
    let mut buffer = BytesMut::from(stream);
    let mut args: Vec<Bytes> = Vec::new();
    let mut commands = 0;
    while parser
        .parse(&mut buffer, &limits, &mut args)
        .expect("valid stream")
    {
        commands += black_box(args.len()).min(1);
    }
    commands
}

fn parsing(c: &mut Criterion) {
    let set = pipeline(1000, |i| {
        vec![
            b"SET".to_vec(),
            format!("key:{i:012}").into_bytes(),
            vec![b'x'; 32],
        ]
    });
    let get = pipeline(1000, |i| {
        vec![b"GET".to_vec(), format!("key:{i:012}").into_bytes()]
    });
    let mut group = c.benchmark_group("parse");
    for (name, stream) in [("set_pipeline_1000", &set), ("get_pipeline_1000", &get)] {
        group.throughput(Throughput::Bytes(stream.len() as u64));
        group.bench_function(name, |b| b.iter(|| assert_eq!(parse_all(stream), 1000)));
    }
    group.finish();
}

fn encoding(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("ok_x1000", |b| {
        b.iter_batched(
            || Reply::new(Resp::V2),
            |mut reply| {
                for _ in 0..1000 {
                    reply.ok();
                }
                reply
            },
            BatchSize::SmallInput,
        )
    });
    let value = vec![b'v'; 32];
    group.bench_function("bulk32_x1000", |b| {
        b.iter_batched(
            || Reply::new(Resp::V2),
            |mut reply| {
                for _ in 0..1000 {
                    reply.bulk(black_box(&value));
                }
                reply
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("integer_x1000", |b| {
        b.iter_batched(
            || Reply::new(Resp::V2),
            |mut reply| {
                for i in 0..1000 {
                    reply.integer(black_box(i * 7919));
                }
                reply
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, parsing, encoding);
criterion_main!(benches);
