use std::path::PathBuf;

use super::*;

fn project(namespaced: bool) -> Project {
    Project::new(
        "demo",
        "demo.example.com",
        "v1",
        "Widget",
        namespaced,
        Framework::Path(PathBuf::from("/checkout")),
    )
    .expect("valid names")
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-new-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn file<'a>(files: &'a [(&'static str, String)], path: &str) -> &'a str {
    files
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, t)| t.as_str())
        .unwrap_or_else(|| panic!("no {path}"))
}

#[test]
fn every_template_renders_without_placeholders() {
    for namespaced in [true, false] {
        let files = files(&project(namespaced)).expect("render");
        assert_eq!(files.len(), TEMPLATES.len());
        for (path, text) in &files {
            assert!(!text.contains("{{"), "{path} keeps a placeholder");
            assert!(!text.is_empty(), "{path} is empty");
        }
    }
}

#[test]
fn names_reach_the_files() {
    let rendered = files(&project(true)).expect("render");
    let files = &rendered;
    let resource = file(files, "src/resource.rs");
    assert!(resource.contains(r#"group = "demo.example.com""#));
    assert!(resource.contains(r#"kind = "Widget", namespaced,"#));
    assert!(resource.contains("pub struct WidgetSpec"));
    assert!(file(files, "src/controller.rs").contains(r#"#[controller(for = Widget, finalizer = "demo.example.com/cleanup", name = "demo-controller")]"#));
    assert!(file(files, "src/bin/manifests.rs").contains("demo::manifests::render()"));
    let cargo = file(files, "Cargo.toml");
    assert!(cargo.contains(r#"name = "demo""#));
    assert!(cargo.contains(r#"controller-runtime = { path = "/checkout/controller-runtime" }"#));
    assert!(cargo.contains(r#"envtest = { path = "/checkout/envtest" }"#));

    let cluster = super::files(&project(false)).expect("render");
    assert!(file(&cluster, "src/resource.rs").contains(r#"kind = "Widget","#));
    assert!(!file(&cluster, "src/resource.rs").contains("namespaced"));
    assert!(file(&cluster, "README.md").contains("Cluster"));
}

#[test]
fn framework_sources() {
    assert_eq!(
        Framework::Git("https://example.invalid/informer-rs".into()).dependency("envtest"),
        r#"{ git = "https://example.invalid/informer-rs" }"#
    );
    assert_eq!(
        Framework::Version("0.1".into()).dependency("envtest"),
        r#""0.1""#
    );
    assert_eq!(
        Framework::Path(PathBuf::from(r#"/odd "dir"\x"#)).dependency("envtest"),
        r#"{ path = "/odd \"dir\"\\x/envtest" }"#
    );
}

#[test]
fn render_refuses_an_unknown_placeholder() {
    let err = render("t", "a {{nope}} b", &[("name", "x".into())]).expect_err("unknown key");
    assert!(err.to_string().contains("{{nope}}"), "{err}");
    let err = render("t", "a {{name", &[("name", "x".into())]).expect_err("unclosed");
    assert!(matches!(err, NewError::Placeholder { .. }));
    assert_eq!(
        render("t", "<{{name}}>", &[("name", "x".into())])
            .ok()
            .as_deref(),
        Some("<x>")
    );
    assert_eq!(
        render(
            "t",
            "use a::{{{name}}, {{name}}Spec};",
            &[("name", "X".into())]
        )
        .ok()
        .as_deref(),
        Some("use a::{X, XSpec};")
    );
}

#[test]
fn bad_names_are_refused_before_anything_is_written() {
    let bad = [
        ("Demo", "demo.example.com", "v1", "Widget", "project name"),
        ("demo", "demo", "v1", "Widget", "group"),
        ("demo", "demo.example.com", "1", "Widget", "version"),
        ("demo", "demo.example.com", "v1", "widget", "kind"),
        ("fn", "demo.example.com", "v1", "Widget", "project name"),
    ];
    for (name, group, version, kind, what) in bad {
        let err = Project::new(
            name,
            group,
            version,
            kind,
            true,
            Framework::Version("0.1".into()),
        )
        .expect_err("refused");
        assert!(
            err.to_string().starts_with(&format!("invalid {what}")),
            "{err}"
        );
    }
}

#[test]
fn existing_files_are_kept_without_force() {
    let dir = scratch("keep");
    let p = project(true);
    let written = write(&p, &dir, false).expect("first write");
    assert_eq!(written.len(), TEMPLATES.len());

    let main = dir.join("src/main.rs");
    std::fs::write(&main, "// my edits").expect("edit");
    let err = write(&p, &dir, false).expect_err("refused");
    let NewError::Exists(paths) = &err else {
        panic!("expected Exists, got {err}");
    };
    assert_eq!(paths.len(), TEMPLATES.len());
    assert!(err.to_string().contains("--force"));
    assert_eq!(
        std::fs::read_to_string(&main).ok().as_deref(),
        Some("// my edits")
    );

    write(&p, &dir, true).expect("forced write");
    assert_ne!(
        std::fs::read_to_string(&main).ok().as_deref(),
        Some("// my edits")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_existing_file_blocks_the_whole_write() {
    let dir = scratch("partial");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("README.md"), "mine").expect("write");
    let err = write(&project(true), &dir, false).expect_err("refused");
    assert!(matches!(&err, NewError::Exists(p) if p.len() == 1), "{err}");
    assert!(!dir.join("Cargo.toml").exists(), "nothing else was written");
    let _ = std::fs::remove_dir_all(&dir);
}
