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

fn with_webhooks(namespaced: bool) -> Project {
    project(namespaced)
        .with_webhooks()
        .expect("v1 has an older version")
}

/// Every variant: namespaced or not, with or without webhooks.
fn variants() -> Vec<Project> {
    vec![
        project(true),
        project(false),
        with_webhooks(true),
        with_webhooks(false),
    ]
}

#[test]
fn every_template_renders_without_placeholders_or_markers() {
    let conditional = TEMPLATES.iter().filter(|t| t.when.is_some()).count();
    for p in variants() {
        let files = files(&p).expect("render");
        let expected = if p.old_version.is_some() {
            TEMPLATES.len()
        } else {
            TEMPLATES.len() - conditional
        };
        assert_eq!(files.len(), expected);
        for (path, text) in &files {
            assert!(
                !text.contains("{{"),
                "{path} keeps a placeholder or a marker"
            );
            assert!(!text.is_empty(), "{path} is empty");
        }
    }
}

#[test]
fn the_webhooks_flag_adds_files_and_sections() {
    let plain = files(&project(true)).expect("render");
    let hooks = files(&with_webhooks(true)).expect("render");
    let paths = |f: &[(&'static str, String)]| f.iter().map(|(p, _)| *p).collect::<Vec<_>>();
    assert!(!paths(&plain).contains(&"src/webhooks.rs"));
    assert!(!paths(&plain).contains(&"tests/it/webhooks.rs"));
    assert!(paths(&hooks).contains(&"src/webhooks.rs"));
    assert!(paths(&hooks).contains(&"tests/it/webhooks.rs"));

    assert!(!file(&plain, "src/lib.rs").contains("pub mod webhooks;"));
    assert!(file(&hooks, "src/lib.rs").contains("pub mod webhooks;"));
    assert!(file(&hooks, "tests/it/main.rs").contains("mod webhooks;"));
    let main = file(&hooks, "src/main.rs");
    assert!(main.contains("builder.webhook_server(demo::webhooks::options())"));
    assert!(main.contains("demo::webhooks::register(&mgr)?"));
    assert!(main.contains("ENABLE_WEBHOOKS"));
    assert!(!file(&plain, "src/main.rs").contains("webhook"));
    // controller-runtime's `webhook` feature, named only when the project
    // serves webhooks (the scaffold turns the default features off).
    assert!(
        file(&hooks, "Cargo.toml").contains(r#"features = ["v1_34", "rustls-tls", "webhook"] }"#)
    );
    assert!(file(&plain, "Cargo.toml").contains(r#"features = ["v1_34", "rustls-tls"] }"#));

    // The older version v1 converts from.
    let resource = file(&hooks, "src/resource.rs");
    assert!(resource.contains("pub mod v1beta1 {"));
    assert!(resource.contains(r#"version = "v1beta1","#));
    assert!(resource.contains("storage = false"));
    assert!(!file(&plain, "src/resource.rs").contains("v1beta1"));
    let webhooks = file(&hooks, "src/webhooks.rs");
    assert!(webhooks.contains("impl Convertible<Widget> for v1beta1::Widget"));
    assert!(webhooks.contains("impl Defaulter<Widget> for WidgetDefaults"));
    assert!(webhooks.contains("impl Validator<Widget> for WidgetRules"));

    // The manifests: a webhooks.yaml, the port, the certificates' RBAC.
    let manifests = file(&hooks, "src/manifests.rs");
    assert!(manifests.contains(r#"file: "webhooks.yaml""#));
    assert!(manifests.contains("WEBHOOK_PORT: i32 = 9443"));
    assert!(manifests.contains(
        "webhooks::manifests().permissions().for_namespaces(WEBHOOK_CERTS, [NAMESPACE])"
    ));
    assert!(manifests.contains("hooks.validating_configuration()"));
    assert!(file(&hooks, "src/controller.rs").contains(
        r#"webhooks(defaulting, validating, conversion, service = "demo-webhook-service")"#
    ));
    assert!(!file(&plain, "src/controller.rs").contains("webhooks("));
    assert!(
        file(&hooks, "src/resource.rs")
            .contains("crate::webhooks::manifests().conversion_crd(both)")
    );
    assert!(!file(&plain, "src/manifests.rs").contains("webhook"));
    assert!(file(&hooks, "Dockerfile").contains("EXPOSE 8080 8081 9443"));
    assert!(file(&plain, "Dockerfile").contains("EXPOSE 8080 8081\n"));
    assert!(file(&hooks, "README.md").contains("webhooks.yaml"));
}

#[test]
fn webhooks_need_an_older_version() {
    let p = Project::new(
        "demo",
        "demo.example.com",
        "v1alpha1",
        "Widget",
        true,
        Framework::Version("0.1".into()),
    )
    .expect("valid names");
    let err = p.with_webhooks().expect_err("no version before v1alpha1");
    assert!(err.to_string().contains("v1alpha1"), "{err}");
    let p = Project::new(
        "demo",
        "demo.example.com",
        "v2",
        "Widget",
        true,
        Framework::Version("0.1".into()),
    )
    .expect("valid names")
    .with_webhooks()
    .expect("v2 converts from v1");
    assert_eq!(p.old_version.as_deref(), Some("v1"));
}

#[test]
fn the_demo_and_envtest_stay_out_of_the_release_build() {
    let rendered = files(&project(true)).expect("render");
    let cargo = file(&rendered, "Cargo.toml");
    assert!(cargo.contains(r#"default = ["demo"]"#));
    assert!(cargo.contains(r#"demo = ["dep:envtest"]"#));
    assert!(cargo.contains(
        r#"envtest = { package = "informer-envtest", path = "/checkout/envtest", default-features = false, optional = true }"#
    ));
    let dev = cargo
        .split("[dev-dependencies]")
        .nth(1)
        .expect("dev-dependencies");
    assert!(
        dev.contains(r#"envtest = { package = "informer-envtest", path = "/checkout/envtest", default-features = false }"#)
    );
    assert!(file(&rendered, "Dockerfile").contains("cargo build --release --no-default-features"));
    let main = file(&rendered, "src/main.rs");
    assert!(main.contains("#[cfg(feature = \"demo\")]\nasync fn demo("));
    assert!(main.contains("#[cfg(not(feature = \"demo\"))]"));
    assert!(file(&rendered, "README.md").contains("--no-default-features"));

    // The other framework sources keep the optional flag.
    let mut git = project(true);
    git.framework = Framework::Git("https://example.invalid/informer-rs".into());
    let cargo = files(&git).expect("render");
    assert!(
        file(&cargo, "Cargo.toml").contains(
            r#"envtest = { package = "informer-envtest", git = "https://example.invalid/informer-rs", default-features = false, optional = true }"#
        )
    );
    let mut version = project(true);
    version.framework = Framework::Version("0.1".into());
    let cargo = files(&version).expect("render");
    assert!(file(&cargo, "Cargo.toml").contains(
        r#"envtest = { package = "informer-envtest", version = "0.1", default-features = false, optional = true }"#
    ));
}

#[test]
fn the_scope_and_the_reconciler_helpers_reach_the_files() {
    let rendered = files(&project(true)).expect("render");
    let main = file(&rendered, "src/main.rs");
    assert!(main.contains(r#"std::env::var("WATCH_NAMESPACE")"#));
    assert!(main.contains(".namespaces(flags.watch_namespaces.clone())"));
    assert!(main.contains("demo::watch_namespaces("));
    assert!(file(&rendered, "src/lib.rs").contains("pub fn watch_namespaces("));
    let manifests = file(&rendered, "src/manifests.rs");
    assert!(manifests.contains("WidgetReconciler::rbac_for_namespaces(scope)"));
    assert!(manifests.contains(r#"manager.env("WATCH_NAMESPACE", watch.join(","))"#));
    // The Deployment comes from the framework's one renderer (its grace
    // period, probes and security context), not from a copy of it.
    assert!(manifests.contains("ManagerDeployment::new(MANAGER, NAMESPACE, IMAGE)"));
    assert!(!manifests.contains("termination_grace_period_seconds"));
    let bin = file(&rendered, "src/bin/manifests.rs");
    assert!(bin.contains("--watch-namespace NS[,NS...]"));
    assert!(bin.contains("demo::watch_namespaces(&watch)"));
    let controller = file(&rendered, "src/controller.rs");
    assert!(controller.contains("create_or_patch(&config_maps"));
    assert!(controller.contains("set_controller_reference("));
    assert!(controller.contains("status.conditions.set_condition("));
    assert!(controller.contains("observed_generation(obj.as_ref())"));
    assert!(controller.contains("owns(ConfigMap)"));
    // The Role test is for namespaced kinds only.
    let test = |p: &Project| files(p).map(|f| file(&f, "tests/it/reconcile.rs").to_string());
    assert!(
        test(&project(true))
            .expect("render")
            .contains("fn a_role_in_the_watched_namespace_is_enough")
    );
    assert!(
        !test(&project(false))
            .expect("render")
            .contains("fn a_role_in_the_watched_namespace_is_enough")
    );
}

#[test]
fn the_demo_runs_unless_a_cluster_is_chosen_explicitly() {
    for p in variants() {
        let rendered = files(&p).expect("render");
        let main = file(&rendered, "src/main.rs");
        // A kubeconfig alone chooses nothing: the flags or a pod do.
        assert!(main.contains(
            "fn cluster_chosen(flags: &Flags) -> bool {\n    \
             flags.kubeconfig.is_some() || flags.context.is_some() || in_pod()\n}"
        ));
        assert!(main.contains("let result = if cluster_chosen(&flags) {"));
        assert!(!main.contains(r#"var_os("KUBECONFIG")"#), "{main}");
        assert!(!main.contains(r#"join(".kube")"#), "{main}");
        assert!(!main.contains("Client::try_default()"), "{main}");
        assert!(main.contains(r#""--kubeconfig" => flags.kubeconfig = Some(value(&name)?)"#));
        assert!(main.contains(r#""--context" => flags.context = Some(value(&name)?)"#));
        assert!(main.contains("[--kubeconfig FILE] [--context NAME]"));
        // The cluster named, then the CRD checked, before the manager
        // (whose start is the first write).
        assert!(main.contains(
            "println!(\"using {about}\");\n    require_crd(&client).await?;\n    \
             let mgr = build_manager(client, flags).await?;"
        ));
        assert!(
            main.contains("cargo run --bin manifests -- --only crd --stdout | kubectl apply -f -")
        );
        assert!(main.contains("your kubeconfig is not used"));
        let readme = file(&rendered, "README.md");
        assert!(
            readme.contains("never touches your cluster unless you pass --kubeconfig or --context")
        );
    }
}

#[test]
fn metrics_are_secure_in_the_deployment_and_plain_locally() {
    let rendered = files(&project(true)).expect("render");
    let main = file(&rendered, "src/main.rs");
    assert!(main.contains(r#""--metrics-secure" => flags.metrics_secure = true"#));
    assert!(
        main.contains("metrics_secure: false,"),
        "plain HTTP by default"
    );
    assert!(main.contains("builder.metrics_secure(SecureMetrics::new())"));
    let manifests = file(&rendered, "src/manifests.rs");
    assert!(manifests.contains(r#".arg("--metrics-secure")"#));
    assert!(manifests.contains("METRICS_PORT: i32 = 8443"));
    assert!(manifests.contains("Permissions::new().secure_metrics().cluster_role(METRICS_AUTH)"));
    assert!(manifests.contains("metrics_reader_cluster_role(METRICS_READER)"));
    assert!(manifests.contains(r#"doc("manager.yaml", &metrics_service())"#));
    assert!(file(&rendered, "tests/it/main.rs").contains("mod metrics;"));
    assert!(
        file(&rendered, "tests/it/metrics.rs").contains(".metrics_secure(SecureMetrics::new())")
    );
}

#[test]
fn sections_keep_drop_nest_and_refuse_mistakes() {
    let flags = [("a", true), ("b", false)];
    let text = "1\n{{#a}}\n2\n{{#b}}\n3\n{{/b}}\n{{^b}}\n4\n{{/b}}\n{{/a}}\n{{^a}}\n5\n{{/a}}\n6\n";
    assert_eq!(
        sections("t", text, &flags).ok().as_deref(),
        Some("1\n2\n4\n6\n")
    );
    for (bad, says) in [
        ("{{#a}}\nx\n", "never closed"),
        ("x\n{{/a}}\n", "closes nothing"),
        (
            "{{#a}}\n{{#b}}\n{{/a}}\n{{/b}}\n",
            "closes {{#b}} of line 2",
        ),
        ("{{#c}}\n{{/c}}\n", "unknown flag \"c\""),
    ] {
        let err = sections("t", bad, &flags).expect_err(bad);
        assert!(err.to_string().contains(says), "{bad:?}: {err}");
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
    assert!(file(files, "src/controller.rs").contains(r#"#[controller(for = Widget, owns(ConfigMap), finalizer = "demo.example.com/cleanup", name = "demo-controller")]"#));
    assert!(file(files, "src/bin/manifests.rs").contains("demo::manifests::render(&watch)"));
    let cargo = file(files, "Cargo.toml");
    assert!(cargo.contains(r#"name = "demo""#));
    assert!(cargo.contains(r#"controller-runtime = { path = "/checkout/controller-runtime", default-features = false, features = ["v1_34", "rustls-tls"] }"#));
    assert!(
        cargo.contains(r#"envtest = { package = "informer-envtest", path = "/checkout/envtest", default-features = false }"#)
    );
    assert!(file(files, "src/controller.rs").contains("status.conditions.set_condition("));

    let cluster = super::files(&project(false)).expect("render");
    assert!(file(&cluster, "src/resource.rs").contains(r#"kind = "Widget","#));
    assert!(!file(&cluster, "src/resource.rs").contains("namespaced"));
    assert!(file(&cluster, "README.md").contains("Cluster"));
}

#[test]
fn framework_sources() {
    assert_eq!(
        Framework::Git("https://example.invalid/informer-rs".into()).dependency_fields("envtest"),
        r#"package = "informer-envtest", git = "https://example.invalid/informer-rs""#
    );
    assert_eq!(
        Framework::Version("0.1".into()).dependency_fields("envtest"),
        r#"package = "informer-envtest", version = "0.1""#
    );
    assert_eq!(
        Framework::Version("0.1".into()).dependency_fields("controller-runtime"),
        r#"version = "0.1""#
    );
    assert_eq!(
        Framework::Path(PathBuf::from(r#"/odd "dir"\x"#)).dependency_fields("envtest"),
        r#"package = "informer-envtest", path = "/odd \"dir\"\\x/envtest""#
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
    let always = TEMPLATES.iter().filter(|t| t.when.is_none()).count();
    assert_eq!(written.len(), always);

    let main = dir.join("src/main.rs");
    std::fs::write(&main, "// my edits").expect("edit");
    let err = write(&p, &dir, false).expect_err("refused");
    let NewError::Exists(paths) = &err else {
        panic!("expected Exists, got {err}");
    };
    assert_eq!(paths.len(), always);
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

/// The Kubernetes version is picked on one line: controller-runtime's
/// features in `Cargo.toml`; no other line of the project names one (envtest
/// follows through feature unification).
#[test]
fn the_kubernetes_version_is_one_line_of_the_project() {
    let rendered = files(&project(true)).expect("render");
    let naming: Vec<(&str, &str)> = rendered
        .iter()
        .flat_map(|(path, text)| text.lines().map(move |line| (*path, line)))
        .filter(|(_, line)| {
            let code = line.split('#').next().unwrap_or("");
            code.contains("\"v1_")
        })
        .collect();
    assert_eq!(naming.len(), 1, "{naming:?}");
    assert_eq!(naming[0].0, "Cargo.toml");
    assert!(naming[0].1.starts_with("controller-runtime = {"));
    assert!(
        naming[0]
            .1
            .contains(r#"default-features = false, features = ["v1_34", "rustls-tls"]"#)
    );
}
