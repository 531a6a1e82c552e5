//! Combining sorted sets: ZUNION, ZINTER, ZDIFF, ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE,
//! ZINTERCARD. Plain sets take part too, every member scoring 1.

use std::collections::HashMap;

use bytes::Bytes;
use latch_keyspace::{SortedSet, Value};

use super::{reply_scored, store_result};
use crate::commands::{err, is, parse_f64, parse_i64, Ctx};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Operation {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Folds `value` into `target` as Redis does; a sum of +inf and -inf counts as 0.
    fn fold(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// What the command does with the result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    /// Answer the members (ZUNION, ZINTER, ZDIFF).
    Reply,
    /// Store under `args[1]` (the *STORE forms).
    Store,
    /// Count the intersection (ZINTERCARD).
    Cardinality,
}

/// One input: its members with scores (empty for a missing key) and its weight.
struct Input {
    members: Vec<(Vec<u8>, f64)>,
    weight: f64,
}

pub(super) fn zunionstore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    combine(ctx, args, 2, Operation::Union, Output::Store);
}

pub(super) fn zinterstore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    combine(ctx, args, 2, Operation::Inter, Output::Store);
}

pub(super) fn zdiffstore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    combine(ctx, args, 2, Operation::Diff, Output::Store);
}

pub(super) fn zunion(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    combine(ctx, args, 1, Operation::Union, Output::Reply);
}

pub(super) fn zinter(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    combine(ctx, args, 1, Operation::Inter, Output::Reply);
}

pub(super) fn zdiff(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    combine(ctx, args, 1, Operation::Diff, Output::Reply);
}

pub(super) fn zintercard(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    combine(ctx, args, 1, Operation::Inter, Output::Cardinality);
}

/// Reads the inputs named by `keys`, in order; `None` after answering WRONGTYPE.
fn read_inputs(ctx: &mut Ctx<'_, '_>, keys: &[Bytes]) -> Option<Vec<Input>> {
    let db = ctx.db();
    let mut inputs = Vec::with_capacity(keys.len());
    for key in keys {
        let members = match ctx.keys.get(db, key).map(|v| &*v) {
            None => Vec::new(),
            Some(Value::ZSet(set)) => set.iter().map(|(m, s)| (m.to_vec(), s)).collect(),
            Some(Value::Set(members)) => members.iter().map(|m| (m.to_vec(), 1.0)).collect(),
            Some(Value::Str(_) | Value::List(_) | Value::Hash(_) | Value::Stream(_)) => {
                ctx.reply.error(err::WRONGTYPE);
                return None;
            }
        };
        inputs.push(Input {
            members,
            weight: 1.0,
        });
    }
    Some(inputs)
}

fn combine(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    numkeys_at: usize,
    operation: Operation,
    output: Output,
) {
    let Some(numkeys) = parse_i64(&args[numkeys_at]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    if numkeys < 1 {
        let name = String::from_utf8_lossy(&args[0]).to_lowercase();
        let message = format!("ERR at least 1 input key is needed for '{name}' command");
        ctx.reply.error(message.as_bytes());
        return;
    }
    let first_key = numkeys_at + 1;
    let available = args.len() - first_key;
    let numkeys = match usize::try_from(numkeys) {
        Ok(n) if n <= available => n,
        _ => {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    };
    let options_at = first_key + numkeys;
    // The inputs are read (a miss is reported), even by the STORE forms.
    ctx.lookups_read(true);
    let Some(mut inputs) = read_inputs(ctx, &args[first_key..options_at]) else {
        return;
    };
    ctx.lookups_read(false);
    let mut aggregate = Aggregate::Sum;
    let mut with_scores = false;
    let mut limit: usize = 0;
    let mut index = options_at;
    while index < args.len() {
        let option = &args[index];
        let remaining = args.len() - index;
        let combines = operation != Operation::Diff && output != Output::Cardinality;
        if combines && remaining > numkeys && is(option, "WEIGHTS") {
            for (input, arg) in inputs.iter_mut().zip(&args[index + 1..]) {
                match parse_f64(arg) {
                    Some(weight) => input.weight = weight,
                    None => {
                        ctx.reply.error(b"ERR weight value is not a float");
                        return;
                    }
                }
            }
            index += 1 + numkeys;
        } else if combines && remaining >= 2 && is(option, "AGGREGATE") {
            let name = &args[index + 1];
            aggregate = if is(name, "SUM") {
                Aggregate::Sum
            } else if is(name, "MIN") {
                Aggregate::Min
            } else if is(name, "MAX") {
                Aggregate::Max
            } else {
                ctx.reply.error(err::SYNTAX);
                return;
            };
            index += 2;
        } else if output == Output::Reply && is(option, "WITHSCORES") {
            with_scores = true;
            index += 1;
        } else if output == Output::Cardinality && remaining >= 2 && is(option, "LIMIT") {
            match parse_i64(&args[index + 1]).filter(|n| *n >= 0) {
                Some(n) => limit = usize::try_from(n).unwrap_or(usize::MAX),
                None => {
                    ctx.reply.error(b"ERR LIMIT can't be negative");
                    return;
                }
            }
            index += 2;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    }
    if output == Output::Cardinality {
        let count = intersection_size(&mut inputs, limit);
        ctx.reply.integer(count as i64);
        return;
    }
    let result = match operation {
        Operation::Union => union(&mut inputs, aggregate),
        Operation::Inter => intersection(&mut inputs, aggregate),
        Operation::Diff => difference(&inputs),
    };
    match output {
        Output::Store => {
            let event = match operation {
                Operation::Union => "zunionstore",
                Operation::Inter => "zinterstore",
                Operation::Diff => "zdiffstore",
            };
            store_result(ctx, &args[1], result, event)
        }
        _ => reply_scored(ctx.reply, result.iter(), with_scores),
    }
}

/// The weighted score of a member of an input; a NaN product (0 * inf) counts as 0.
fn weighted(score: f64, weight: f64) -> f64 {
    let product = score * weight;
    if product.is_nan() {
        0.0
    } else {
        product
    }
}

fn union(inputs: &mut [Input], aggregate: Aggregate) -> SortedSet {
    // Smallest first, as Redis does (it only changes the order floating sums happen in).
    inputs.sort_by_key(|input| input.members.len());
    let mut totals: HashMap<Vec<u8>, f64> = HashMap::new();
    for input in inputs.iter_mut() {
        let weight = input.weight;
        for (member, score) in input.members.drain(..) {
            let value = weighted(score, weight);
            match totals.get_mut(&member) {
                Some(total) => aggregate.fold(total, value),
                None => {
                    totals.insert(member, value);
                }
            }
        }
    }
    let mut result = SortedSet::new();
    for (member, score) in totals {
        result.insert(&member, score);
    }
    result
}

/// Inputs other than the smallest, as lookup tables (the smallest is walked).
fn lookups(inputs: &mut [Input]) -> Vec<(HashMap<Vec<u8>, f64>, f64)> {
    inputs.sort_by_key(|input| input.members.len());
    inputs
        .iter_mut()
        .skip(1)
        .map(|input| (input.members.drain(..).collect(), input.weight))
        .collect()
}

fn intersection(inputs: &mut [Input], aggregate: Aggregate) -> SortedSet {
    let mut result = SortedSet::new();
    if inputs.is_empty() {
        return result;
    }
    let others = lookups(inputs);
    let first = &inputs[0];
    'members: for (member, score) in &first.members {
        let mut total = weighted(*score, first.weight);
        for (table, weight) in &others {
            match table.get(member) {
                // Redis zeroes a NaN product only for the member it starts from.
                Some(&score) => aggregate.fold(&mut total, score * weight),
                None => continue 'members,
            }
        }
        result.insert(member, total);
    }
    result
}

/// How many members every input holds, stopping at `limit` (0: no limit).
fn intersection_size(inputs: &mut [Input], limit: usize) -> usize {
    if inputs.is_empty() {
        return 0;
    }
    let others = lookups(inputs);
    let mut count = 0;
    for (member, _) in &inputs[0].members {
        if others.iter().all(|(table, _)| table.contains_key(member)) {
            count += 1;
            if limit != 0 && count >= limit {
                break;
            }
        }
    }
    count
}

/// Members of the first input that no other input holds, with their scores.
fn difference(inputs: &[Input]) -> SortedSet {
    let mut result = SortedSet::new();
    let Some((first, rest)) = inputs.split_first() else {
        return result;
    };
    let others: Vec<std::collections::HashSet<&[u8]>> = rest
        .iter()
        .map(|input| input.members.iter().map(|(m, _)| m.as_slice()).collect())
        .collect();
    for (member, score) in &first.members {
        if !others.iter().any(|set| set.contains(member.as_slice())) {
            result.insert(member, *score);
        }
    }
    result
}
