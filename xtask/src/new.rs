//! `cargo xtask new`: scaffolds a standalone controller project.
//!
//! The project is one crate: a custom resource (`src/resource.rs`), its
//! controller (`src/controller.rs`), a `main` with a manager and flags that
//! runs a demo on the embedded API server unless a cluster is chosen
//! (the `demo` cargo feature, on by default, off in the Dockerfile's
//! release build), a `manifests` binary writing `deploy/` from the code
//! (CRD, RBAC, ServiceAccount, Deployment), envtest integration tests, a
//! Dockerfile and a README. `--webhooks` adds a defaulter, a validator and
//! an older version of the kind converted through the hub
//! (`src/webhooks.rs`), their manifests and their envtest tests.
//!
//! The files are templates under `xtask/templates/`, rendered by replacing
//! `{{placeholders}}` and keeping or dropping `{{#flag}}` ... `{{/flag}}`
//! sections (`{{^flag}}` for the inverse; the markers stand on lines of
//! their own); a template may exist only under a flag. Names are checked
//! first, and nothing is written unless every file can be (an existing file
//! is only replaced with `--force`).

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
    /// A template's `{{#flag}}` sections do not nest or close, or name an
    /// unknown flag (a bug in xtask).
    #[error("template {template}: {problem}")]
    Section {
        /// The template file.
        template: &'static str,
        /// What is wrong, with the line number.
        problem: String,
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
    /// Add admission webhooks (a defaulter and a validator) and an older
    /// version of the kind converted to VERSION by a conversion webhook,
    /// served by the manager with self-managed certificates.
    #[arg(long)]
    pub webhooks: bool,
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
    /// The fields of the inline table that depends on the framework's crate
    /// `krate` (`path = "..."`), to which the template adds more
    /// (`default-features = false`, `optional = true`). `krate` is the name the
    /// project's code uses (and the framework's directory); a package
    /// published under another name gets `package = "..."` first.
    fn dependency_fields(&self, krate: &str) -> String {
        let source = match self {
            Framework::Path(root) => {
                let path = root.join(krate);
                format!("path = {}", toml_string(&path.display().to_string()))
            }
            Framework::Git(url) => format!("git = {}", toml_string(url)),
            Framework::Version(v) => format!("version = {}", toml_string(v)),
        };
        match package_name(krate) {
            package if package == krate => source,
            package => format!("package = {}, {source}", toml_string(package)),
        }
    }
}

/// The package name of the framework's crate whose library is `krate`:
/// the same, except for the in-process API server, whose short name is
/// another project's on crates.io.
fn package_name(krate: &str) -> &str {
    match krate {
        "envtest" => "informer-envtest",
        other => other,
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
    /// With `--webhooks`: the older version converted to [`Project::version`].
    pub old_version: Option<String>,
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
            old_version: None,
        })
    }

    /// Adds the webhooks: a defaulter, a validator, and the version before
    /// [`Project::version`] (`v1` -> `v1beta1`, `v2` -> `v1`, `v1beta2` ->
    /// `v1beta1`, `v1beta1` -> `v1alpha1`) served and converted through the
    /// hub. `v1alpha1` has no older version and is refused.
    pub fn with_webhooks(mut self) -> Result<Self, NewError> {
        let old = validate::older_version(&self.version).ok_or_else(|| NewError::InvalidName {
            what: "version",
            value: self.version.clone(),
            reason: "--webhooks adds the version before it, converted to it, and there is none \
                     before v<N>alpha1: scaffold v1 (or v1beta1, v1alpha2, ...)"
                .into(),
        })?;
        self.old_version = Some(old);
        Ok(self)
    }

    /// The flags `{{#flag}}` sections and conditional templates test.
    fn flags(&self) -> Vec<(&'static str, bool)> {
        vec![
            ("webhooks", self.old_version.is_some()),
            ("namespaced", self.namespaced),
        ]
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        let plural = validate::plural(&self.kind);
        let old_version = self.old_version.clone().unwrap_or_default();
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
                "controller_runtime_dep_inline",
                self.framework.dependency_fields("controller-runtime"),
            ),
            (
                "envtest_dep_inline",
                self.framework.dependency_fields("envtest"),
            ),
            ("old_version", old_version),
            (
                "webhook_feature",
                if self.old_version.is_some() {
                    r#", "webhook""#
                } else {
                    ""
                }
                .into(),
            ),
        ]
    }
}

/// One template: where it goes in the project, its text, and the flag it
/// is written under (always when `None`).
struct Template {
    path: &'static str,
    text: &'static str,
    when: Option<&'static str>,
}

macro_rules! templates {
    ($($path:literal $(if $flag:literal)?),* $(,)?) => {
        &[$(Template {
            path: $path,
            text: include_str!(concat!("../templates/", $path, ".tmpl")),
            when: templates!(@when $($flag)?),
        }),*]
    };
    (@when) => { None };
    (@when $flag:literal) => { Some($flag) };
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
    "src/webhooks.rs" if "webhooks",
    "src/bin/manifests.rs",
    "tests/it/main.rs",
    "tests/it/reconcile.rs",
    "tests/it/manifests.rs",
    "tests/it/metrics.rs",
    "tests/it/webhooks.rs" if "webhooks",
];

/// Keeps the lines of `text` inside `{{#flag}}` ... `{{/flag}}` when the
/// flag is set and drops them otherwise (`{{^flag}}` the other way round);
/// the marker lines themselves go. Sections nest.
fn sections(
    template: &'static str,
    text: &str,
    flags: &[(&'static str, bool)],
) -> Result<String, NewError> {
    let problem = |line: usize, problem: String| NewError::Section {
        template,
        problem: format!("line {line}: {problem}"),
    };
    let mut out = String::with_capacity(text.len());
    // (flag, line opened, whether its lines are kept)
    let mut open: Vec<(&str, usize, bool)> = Vec::new();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let number = index + 1;
        let marker = line
            .trim()
            .strip_prefix("{{")
            .and_then(|m| m.strip_suffix("}}"))
            .and_then(|m| m.chars().next().map(|c| (c, &m[1..])))
            .filter(|(c, _)| matches!(c, '#' | '^' | '/'));
        let Some((sigil, name)) = marker else {
            if open.iter().all(|(_, _, keep)| *keep) {
                out.push_str(line);
            }
            continue;
        };
        if sigil == '/' {
            match open.pop() {
                Some((opened, _, _)) if opened == name => continue,
                Some((opened, at, _)) => {
                    return Err(problem(
                        number,
                        format!("{{{{/{name}}}}} closes {{{{#{opened}}}}} of line {at}"),
                    ));
                }
                None => return Err(problem(number, format!("{{{{/{name}}}}} closes nothing"))),
            }
        }
        let value = flags
            .iter()
            .find(|(flag, _)| *flag == name)
            .map(|(_, value)| *value)
            .ok_or_else(|| problem(number, format!("unknown flag {name:?}")))?;
        open.push((name, number, if sigil == '#' { value } else { !value }));
    }
    if let Some((name, at, _)) = open.pop() {
        return Err(problem(at, format!("{{{{#{name}}}}} is never closed")));
    }
    Ok(out)
}

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
    let flags = project.flags();
    let on = |flag: &str| flags.iter().any(|(f, v)| *f == flag && *v);
    TEMPLATES
        .iter()
        .filter(|t| t.when.is_none_or(on))
        .map(|t| {
            let text = sections(t.path, t.text, &flags)?;
            Ok((t.path, render(t.path, &text, &values)?))
        })
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
    let mut project = Project::new(
        &args.name,
        &args.group,
        &args.version,
        &args.kind,
        !args.cluster,
        framework.clone(),
    )?;
    if args.webhooks {
        project = project.with_webhooks()?;
    }
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
        "next:\n  cd {}\n  cargo test       # the reconcile{} and the manifests against the embedded API server\n  cargo run        # a demo on the embedded API server (-- --context NAME: a cluster)",
        dir.display(),
        if args.webhooks { ", the webhooks" } else { "" }
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
