//! LCS: the longest common subsequence of two strings.

use bytes::Bytes;

use super::string_of;
use crate::commands::{err, is, parse_i64, Ctx};
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, FindKeys, Group, KeySpec};

pub const LCS: CommandSpec = CommandSpec {
    name: "lcs",
    group: Group::String,
    summary: "Finds the longest common subsequence of the strings at two keys: the text, its length, or where it matches.",
    since: "7.0.0",
    complexity: "O(N*M) where N and M are the lengths of s1 and s2, respectively",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::STRING,
    key_specs: &[KeySpec {
        find: FindKeys::Range { last_key: 1, key_step: 1, limit: 0 },
        ..KeySpec::single(1, keyflag::RO | keyflag::ACCESS)
    }],
    arguments: &[
        Arg::key("key1", 0),
        Arg::key("key2", 0),
        Arg::token("len", "LEN").optional(),
        Arg::token("idx", "IDX").optional(),
        Arg::integer("len").with_token("MINMATCHLEN").optional(),
        Arg::token("withmatchlen", "WITHMATCHLEN").optional(),
    ],
    handler: Some(lcs),
    ..CommandSpec::BASE
};

/// One run of matching bytes: inclusive ranges in each string.
struct Match {
    a_start: u32,
    a_end: u32,
    b_start: u32,
    b_end: u32,
}

impl Match {
    fn len(&self) -> u32 {
        self.a_end - self.a_start + 1
    }
}

/// The string at `key`, empty when missing; `Err` when the key holds another type.
fn string_or_empty(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Vec<u8>, ()> {
    let db = ctx.db();
    match ctx.keys.get(db, key) {
        None => Ok(Vec::new()),
        Some(entry) => string_of(entry).cloned().ok_or(()),
    }
}

fn lcs(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Both values are needed at once and a view hands out one entry at a time; copying them
    // costs little next to the O(N*M) work that follows.
    let (a, b) = match (
        string_or_empty(ctx, &args[1]),
        string_or_empty(ctx, &args[2]),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            ctx.reply
                .error(b"ERR The specified keys must contain string values");
            return;
        }
    };
    let mut want_len = false;
    let mut want_idx = false;
    let mut with_match_len = false;
    let mut min_match_len: u64 = 0;
    let mut i = 3;
    while i < args.len() {
        let word = &args[i][..];
        if is(word, "IDX") {
            want_idx = true;
        } else if is(word, "LEN") {
            want_len = true;
        } else if is(word, "WITHMATCHLEN") {
            with_match_len = true;
        } else if is(word, "MINMATCHLEN") && i + 1 < args.len() {
            let Some(n) = parse_i64(&args[i + 1]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            min_match_len = n.max(0) as u64;
            i += 1;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        i += 1;
    }
    if want_len && want_idx {
        ctx.reply
            .error(b"ERR If you want both the length and indexes, please just use IDX.");
        return;
    }
    if a.len() >= (u32::MAX - 1) as usize || b.len() >= (u32::MAX - 1) as usize {
        ctx.reply.error(b"ERR String too long for LCS");
        return;
    }
    // The table of LCS lengths of every pair of prefixes, (|a|+1) x (|b|+1) u32 cells.
    let width = b.len() + 1;
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    let table_bytes = cells.saturating_mul(4);
    if table_bytes > ctx.server.config.proto_max_bulk_len() {
        ctx.reply
            .error(b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
        return;
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells as usize).is_err() {
        ctx.reply
            .error(b"ERR Insufficient memory, failed allocating transient memory for LCS");
        return;
    }
    table.resize(cells as usize, 0);
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let total = table[a.len() * width + b.len()];

    if want_len {
        ctx.reply.integer(total as i64);
        return;
    }

    // Walk back from the end, collecting the common bytes (backwards) and the runs where
    // both strings match contiguously, as Redis reports them: last run first.
    let mut common = vec![0u8; total as usize];
    let mut remaining = total as usize;
    let mut matches: Vec<Match> = Vec::new();
    let mut run: Option<Match> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            remaining -= 1;
            common[remaining] = a[i - 1];
            let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
            match &mut run {
                None => {
                    run = Some(Match {
                        a_start: ai,
                        a_end: ai,
                        b_start: bj,
                        b_end: bj,
                    })
                }
                // Contiguous with the current run: extend it backwards.
                Some(current) if current.a_start == ai + 1 && current.b_start == bj + 1 => {
                    current.a_start = ai;
                    current.b_start = bj;
                }
                Some(_) => emit = true,
            }
            // A run touching the start of either string cannot grow further.
            if let Some(current) = &run {
                if current.a_start == 0 || current.b_start == 0 {
                    emit = true;
                }
            }
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * width + j] > table[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if run.is_some() {
                emit = true;
            }
        }
        if emit {
            if let Some(done) = run.take() {
                if min_match_len == 0 || done.len() as u64 >= min_match_len {
                    matches.push(done);
                }
            }
        }
    }

    if !want_idx {
        ctx.reply.bulk(&common);
        return;
    }
    ctx.reply.map(2);
    ctx.reply.bulk(b"matches");
    ctx.reply.array(matches.len());
    for m in &matches {
        ctx.reply.array(if with_match_len { 3 } else { 2 });
        ctx.reply.array(2);
        ctx.reply.integer(m.a_start as i64);
        ctx.reply.integer(m.a_end as i64);
        ctx.reply.array(2);
        ctx.reply.integer(m.b_start as i64);
        ctx.reply.integer(m.b_end as i64);
        if with_match_len {
            ctx.reply.integer(m.len() as i64);
        }
    }
    ctx.reply.bulk(b"len");
    ctx.reply.integer(total as i64);
}
