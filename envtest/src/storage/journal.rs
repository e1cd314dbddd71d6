//! Optional persistence (`--data-dir`): every write is appended to a
//! journal of JSON lines and fsync'd before it is acknowledged, so a killed
//! server restarts with every acknowledged write. On open, the journal is
//! replayed (a torn last line from a crash is dropped) and rewritten as a
//! compact snapshot, one record per live object, through a temporary file
//! and an atomic rename. History is not persisted: after a restart, resuming
//! a watch from an earlier revision gets 410 and clients relist.

use super::{ObjKey, State, StoredObject};
use bytes::Bytes;
use serde_json::{Value, json};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const FILE: &str = "journal.jsonl";

/// An open journal.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
}

impl Journal {
    /// Append one record and fsync it.
    fn append(&mut self, record: &Value) {
        let mut line = record.to_string();
        line.push('\n');
        let result = self
            .file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data());
        if let Err(e) = result {
            tracing::error!(path = %self.path.display(), error = %e, "could not persist a write to the journal");
        }
    }

    /// Record a stored object version.
    pub fn put(&mut self, res: &str, key: &ObjKey, obj: &StoredObject) {
        self.append(&json!({"rev": obj.rev, "op": "put", "res": res, "ns": key.0, "name": key.1, "object": obj.value}));
    }

    /// Record a removal at `rev`.
    pub fn delete(&mut self, res: &str, key: &ObjKey, rev: u64) {
        self.append(&json!({"rev": rev, "op": "delete", "res": res, "ns": key.0, "name": key.1}));
    }
}

fn replay(path: &Path, st: &mut State) -> std::io::Result<()> {
    let Ok(file) = File::open(path) else {
        return Ok(());
    };
    for line in BufReader::new(file).lines() {
        let line = line?;
        // A torn line can only be the last one written before a crash.
        let Ok(rec) = serde_json::from_str::<Value>(&line) else {
            break;
        };
        let (Some(rev), Some(res), Some(ns), Some(name)) = (
            rec["rev"].as_u64(),
            rec["res"].as_str(),
            rec["ns"].as_str(),
            rec["name"].as_str(),
        ) else {
            break;
        };
        st.rev = st.rev.max(rev);
        if res.is_empty() {
            continue;
        }
        let key: ObjKey = (ns.to_string(), name.to_string());
        if rec["op"] == "put" {
            let value = rec["object"].clone();
            let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
            let obj = Arc::new(StoredObject::from_parts(value, json, rev));
            if let Some(prev) = st.table(res).objects.insert(key.clone(), obj.clone()) {
                st.owners.remove(res, &key, &prev.value);
            }
            st.owners.add(res, &key, &obj.value);
        } else if let Some(prev) = st.table(res).objects.remove(&key) {
            st.owners.remove(res, &key, &prev.value);
        }
    }
    Ok(())
}

/// Load `dir`'s journal into `st`, rewrite it compactly, and open it for appending.
pub fn open(dir: &Path, st: &mut State) -> std::io::Result<Journal> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(FILE);
    replay(&path, st)?;
    st.compacted = st.rev;
    let tmp = dir.join(format!("{FILE}.tmp"));
    {
        let mut out = File::create(&tmp)?;
        let mut buf = Vec::new();
        let mut tables: Vec<_> = st.tables.iter().collect();
        tables.sort_by(|a, b| a.0.cmp(b.0));
        for (res, table) in tables {
            for (key, obj) in &table.objects {
                let rec = json!({"rev": obj.rev, "op": "put", "res": &**res, "ns": key.0, "name": key.1, "object": obj.value});
                buf.extend_from_slice(rec.to_string().as_bytes());
                buf.push(b'\n');
            }
        }
        // Keep the revision even if every object is gone.
        buf.extend_from_slice(
            json!({"rev": st.rev, "op": "delete", "res": "", "ns": "", "name": ""})
                .to_string()
                .as_bytes(),
        );
        buf.push(b'\n');
        out.write_all(&buf)?;
        out.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    if let Ok(d) = File::open(dir) {
        // Make the rename durable; not every platform can sync a directory.
        let _ = d.sync_all();
    }
    let file = OpenOptions::new().append(true).open(&path)?;
    Ok(Journal { file, path })
}
