//! File names inside the AOF directory, as Redis 7.0 forms them from `appendfilename`.

const MANIFEST_SUFFIX: &str = ".manifest";
const TEMP_PREFIX: &str = "temp-";

/// The manifest's name: `appendonly.aof.manifest`.
pub fn manifest_name(appendfilename: &str) -> String {
    format!("{appendfilename}{MANIFEST_SUFFIX}")
}

/// The name a new manifest is written under before it is renamed into place:
/// `temp-appendonly.aof.manifest`.
pub fn temp_manifest_name(appendfilename: &str) -> String {
    format!("{TEMP_PREFIX}{appendfilename}{MANIFEST_SUFFIX}")
}

/// A base file's name: `appendonly.aof.1.base.rdb` when it is an RDB snapshot,
/// `appendonly.aof.1.base.aof` when it holds commands.
pub fn base_name(appendfilename: &str, seq: u64, rdb_preamble: bool) -> String {
    let format = if rdb_preamble { "rdb" } else { "aof" };
    format!("{appendfilename}.{seq}.base.{format}")
}

/// An incr file's name: `appendonly.aof.1.incr.aof`.
pub fn incr_name(appendfilename: &str, seq: u64) -> String {
    format!("{appendfilename}.{seq}.incr.aof")
}

/// The file Redis collects writes in while AOF is being switched on, before the first rewrite
/// finishes: `temp-appendonly.aof.incr`.
pub fn temp_incr_name(appendfilename: &str) -> String {
    format!("{TEMP_PREFIX}{appendfilename}.incr")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_redis() {
        let f = "appendonly.aof";
        assert_eq!(manifest_name(f), "appendonly.aof.manifest");
        assert_eq!(temp_manifest_name(f), "temp-appendonly.aof.manifest");
        assert_eq!(base_name(f, 1, true), "appendonly.aof.1.base.rdb");
        assert_eq!(base_name(f, 12, false), "appendonly.aof.12.base.aof");
        assert_eq!(incr_name(f, 3), "appendonly.aof.3.incr.aof");
        assert_eq!(temp_incr_name(f), "temp-appendonly.aof.incr");
        assert_eq!(incr_name("x y", 1), "x y.1.incr.aof");
    }
}
