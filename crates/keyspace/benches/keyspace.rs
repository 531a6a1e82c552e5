//! The keyspace's hot paths, as a command runs them: lock the key's shard, then get, set or
//! set a deadline. `cargo bench -p latch-keyspace`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use latch_keyspace::{Deadline, Keyspace, Value};

const KEYS: usize = 100_000;

fn key(i: usize) -> Vec<u8> {
    format!("key:{i:012}").into_bytes()
}

fn filled() -> Keyspace {
    let keyspace = Keyspace::new(16, 256);
    for i in 0..KEYS {
        let k = key(i);
        let mut locked = keyspace.lock_keys(&[&k]);
        locked.set(0, &k, Value::Str(vec![b'v'; 32]), None);
    }
    keyspace
}

fn operations(c: &mut Criterion) {
    let keyspace = filled();
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let mut group = c.benchmark_group("keyspace");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function("get_hit", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            let k = &keys[i];
            let mut locked = keyspace.lock_keys(&[k]);
            black_box(locked.get(0, k).is_some())
        })
    });
    group.bench_function("get_miss", |b| {
        b.iter(|| {
            let mut locked = keyspace.lock_keys(&[b"missing"]);
            black_box(locked.get(0, b"missing").is_none())
        })
    });
    group.bench_function("set_overwrite", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            let k = &keys[i];
            let mut locked = keyspace.lock_keys(&[k]);
            black_box(locked.set(0, k, Value::Str(vec![b'w'; 32]), None))
        })
    });
    group.bench_function("expire", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            let k = &keys[i];
            let mut locked = keyspace.lock_keys(&[k]);
            let deadline = Deadline::after(locked.now(), 30_000);
            black_box(locked.set_deadline(0, k, deadline))
        })
    });
    group.finish();
}

criterion_group!(benches, operations);
criterion_main!(benches);
