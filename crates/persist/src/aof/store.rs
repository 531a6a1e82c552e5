//! Replacing the manifest on disk so that a crash leaves either the old or the new one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::manifest::Manifest;
use super::naming::{manifest_name, temp_manifest_name};

/// Writes `manifest` to `dir/<appendfilename>.manifest` as Redis does: into a temporary file
/// in the same directory, fsynced, renamed over the old manifest, and then the directory is
/// fsynced so the rename (and any new AOF files) survive a power loss.
pub fn write_manifest(dir: &Path, appendfilename: &str, manifest: &Manifest) -> io::Result<()> {
    let final_path = dir.join(manifest_name(appendfilename));
    let temp_path = dir.join(temp_manifest_name(appendfilename));
    let written = write_synced(&temp_path, manifest.to_text().as_bytes())
        .and_then(|()| fs::rename(&temp_path, &final_path));
    if let Err(e) = written {
        // The temporary file is useless now; failing to remove it is not worth reporting
        // over the error that matters.
        let _ = fs::remove_file(&temp_path);
        return Err(e);
    }
    File::open(dir)?.sync_all()
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Redis creates the manifest with mode 0644.
        options.mode(0o644);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
