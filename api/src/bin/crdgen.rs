//! Writes the CRD manifests generated from the API types.
//!
//! Usage: `crdgen [DIR]` (default `manifests/crds`). Files in DIR that are not generated are
//! removed, so a renamed kind leaves nothing stale behind.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "manifests/crds".to_owned()));
    std::fs::create_dir_all(&dir)?;
    let files = liqo_api::crds::rendered();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !files.iter().any(|(n, _)| *n == name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    for (name, content) in &files {
        std::fs::write(dir.join(name), content)?;
        println!("wrote {}", dir.join(name).display());
    }
    Ok(())
}
