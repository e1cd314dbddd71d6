//! `cargo xtask new`: scaffolds a standalone controller project.
//!
//! The project is one crate: a custom resource (`src/resource.rs`), its
//! controller (`src/controller.rs`), a `main` with a manager and flags that
//! runs a demo on the embedded API server when no cluster is configured, a
//! `manifests` binary writing `deploy/` from the code (CRD, RBAC,
//! ServiceAccount, Deployment), envtest integration tests, a Dockerfile and a
//! README. The files are templates under `xtask/templates/`, rendered by
//! replacing `{{placeholders}}`; names are checked first, and nothing is
//! written unless every file can be (an existing file is only replaced with
//! `--force`).

mod validate;

use std::path::{Path, PathBuf};

/// Errors of `cargo xtask new`.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// A name breaks a rule.
    #[error("invalid {what} {value:?}: {reason}")]
    InvalidName {
        /// Which argument.
        what: &'static str,
        /// What was given.
        value: String,
        /// Which rule, and what would be accepted.
        reason: String,
    },
    /// Files exist and `--force` was not given; nothing was written.
    #[error(
        "not overwriting existing files (pass --force to replace them; nothing was written):\n  {}",
        .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join("\n  ")
    )]
    Exists(Vec<PathBuf>),
    /// The framework path does not hold this workspace.
    #[error("--framework-path {0}: no controller-runtime/Cargo.toml there")]
    NotAFramework(PathBuf),
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A template kept a placeholder no value was given for (a bug in
    /// xtask).
    #[error("template {template} has an unknown placeholder {placeholder}")]
    Placeholder {
        /// The template file.
        template: &'static str,
        /// The placeholder left.
        placeholder: String,
    },
}

/// `cargo xtask new NAME --group G --version V --kind K ...`
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The project (crate) name, e.g. `demo` or `widget-operator`.
    pub name: String,
    /// The API group of the custom resource, a domain you own (e.g. demo.example.com).
    #[arg(long)]
    pub group: String,
    /// The API version (v1, v1alpha1, v2beta1, ...).
    #[arg(long)]
    pub version: String,
    /// The kind, UpperCamelCase (e.g. Widget).
    #[arg(long)]
    pub kind: String,
    /// The kind is namespaced (the default).
    #[arg(long, conflicts_with = "cluster")]
    pub namespaced: bool,
    /// The kind is cluster-scoped.
    #[arg(long)]
    pub cluster: bool,
    /// Where to create the project (default: ./NAME).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Depend on the framework at this checkout (default: this checkout).
    #[arg(long, group = "framework")]
    pub framework_path: Option<PathBuf>,
    /// Depend on the framework from this git repository.
    #[arg(long, group = "framework")]
    pub framework_git: Option<String>,
    /// Depend on this published version of the framework.
    #[arg(long, group = "framework")]
    pub framework_version: Option<String>,
    /// Replace files that already exist.
    #[arg(long)]
    pub force: bool,
}

/// Where the generated project takes the framework from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framework {
    /// A local checkout (path dependencies).
    Path(PathBuf),
    /// A git repository.
    Git(String),
    /// A published version.
    Version(String),
}

impl Framework {
    /// The dependency specification of the framework's crate `krate`.
    fn dependency(&self, krate: &str) -> String {
        match self {
            Framework::Path(root) => {
                let path = root.join(krate);
                format!("{{ path = {} }}", toml_string(&path.display().to_string()))
            }
            Framework::Git(url) => format!("{{ git = {} }}", toml_string(url)),
            Framework::Version(v) => toml_string(v),
        }
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Everything the templates are rendered with.
#[derive(Debug, Clone)]
pub struct Project {
    /// Crate name.
    pub name: String,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Whether the kind is namespaced.
    pub namespaced: bool,
    /// The framework dependency.
    pub framework: Framework,
}

impl Project {
    /// Checks every name.
    pub fn new(
        name: &str,
        group: &str,
        version: &str,
        kind: &str,
        namespaced: bool,
        framework: Framework,
    ) -> Result<Self, NewError> {
        validate::project_name(name)?;
        validate::group(group)?;
        validate::version(version)?;
        validate::kind(kind)?;
        Ok(Project {
            name: name.into(),
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            namespaced,
            framework,
        })
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        let plural = validate::plural(&self.kind);
        vec![
            ("name", self.name.clone()),
            ("crate", validate::crate_ident(&self.name)),
            ("group", self.group.clone()),
            ("version", self.version.clone()),
            ("kind", self.kind.clone()),
            ("kind_lower", self.kind.to_ascii_lowercase()),
            ("plural", plural),
            (
                "scope",
                if self.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }
                .into(),
            ),
            (
                "namespaced_attr",
                if self.namespaced { " namespaced," } else { "" }.into(),
            ),
            ("namespaced", self.namespaced.to_string()),
            (
                "controller_runtime_dep",
                self.framework.dependency("controller-runtime"),
            ),
            ("envtest_dep", self.framework.dependency("envtest")),
        ]
    }
}

/// One template: where it goes in the project and its text.
struct Template {
    path: &'static str,
    text: &'static str,
}

macro_rules! templates {
    ($($path:literal),* $(,)?) => {
        &[$(Template { path: $path, text: include_str!(concat!("../templates/", $path, ".tmpl")) }),*]
    };
}

/// Every file of a new project.
const TEMPLATES: &[Template] = templates![
    "Cargo.toml",
    "README.md",
    "Dockerfile",
    ".dockerignore",
    ".gitignore",
    "src/lib.rs",
    "src/main.rs",
    "src/resource.rs",
    "src/controller.rs",
    "src/manifests.rs",
    "src/bin/manifests.rs",
    "tests/it/main.rs",
    "tests/it/reconcile.rs",
    "tests/it/manifests.rs",
];

/// Replaces every `{{key}}` of `text`; fails on a placeholder without a value.
fn render(
    template: &'static str,
    text: &str,
    values: &[(&'static str, String)],
) -> Result<String, NewError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(mut start) = rest.find("{{") {
        // `{{{kind}}`: a literal brace (a Rust `use` list) before a placeholder.
        while rest[start + 2..].starts_with('{') {
            start += 1;
        }
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| NewError::Placeholder {
            template,
            placeholder: after.chars().take(20).collect(),
        })?;
        let key = &after[..end];
        let value =
            values
                .iter()
                .find(|(k, _)| *k == key)
                .ok_or_else(|| NewError::Placeholder {
                    template,
                    placeholder: format!("{{{{{key}}}}}"),
                })?;
        out.push_str(&value.1);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The rendered files of `project`: (relative path, contents).
pub fn files(project: &Project) -> Result<Vec<(&'static str, String)>, NewError> {
    let values = project.values();
    TEMPLATES
        .iter()
        .map(|t| Ok((t.path, render(t.path, t.text, &values)?)))
        .collect()
}

/// Writes `project` into `dir`. Refuses (writing nothing) when a file exists
/// and `force` is false.
pub fn write(project: &Project, dir: &Path, force: bool) -> Result<Vec<PathBuf>, NewError> {
    let files = files(project)?;
    if !force {
        let existing: Vec<PathBuf> = files
            .iter()
            .map(|(rel, _)| dir.join(rel))
            .filter(|p| p.exists())
            .collect();
        if !existing.is_empty() {
            return Err(NewError::Exists(existing));
        }
    }
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| NewError::Io {
                action: "creating directory",
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| NewError::Io {
            action: "writing",
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// This checkout's root (the parent of the xtask crate).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or(manifest_dir)
}

/// Runs `cargo xtask new`.
pub fn run(args: &Args) -> Result<(), NewError> {
    let framework = match (
        &args.framework_path,
        &args.framework_git,
        &args.framework_version,
    ) {
        (_, Some(url), _) => Framework::Git(url.clone()),
        (_, _, Some(version)) => Framework::Version(version.clone()),
        (Some(path), _, _) => Framework::Path(absolute(path)?),
        (None, None, None) => Framework::Path(workspace_root()),
    };
    if let Framework::Path(root) = &framework
        && !root.join("controller-runtime").join("Cargo.toml").is_file()
    {
        return Err(NewError::NotAFramework(root.clone()));
    }
    let project = Project::new(
        &args.name,
        &args.group,
        &args.version,
        &args.kind,
        !args.cluster,
        framework.clone(),
    )?;
    let dir = args
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let written = write(&project, &dir, args.force)?;
    // With the framework from this checkout, start from its lock file so the
    // project resolves the same dependency versions (and reuses their builds).
    if let Framework::Path(root) = &framework {
        let lock = dir.join("Cargo.lock");
        if !lock.exists() || args.force {
            let _ = std::fs::copy(root.join("Cargo.lock"), &lock);
        }
    }
    println!(
        "created {} ({} files) in {}",
        args.name,
        written.len(),
        dir.display()
    );
    println!(
        "next:\n  cd {}\n  cargo test       # the reconcile and the manifests against the embedded API server\n  cargo run        # a demo on the embedded API server (or the cluster in KUBECONFIG)",
        dir.display()
    );
    Ok(())
}

fn absolute(path: &Path) -> Result<PathBuf, NewError> {
    std::path::absolute(path).map_err(|source| NewError::Io {
        action: "resolving",
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
