use super::*;
use syn::parse_quote;

fn parse(input: DeriveInput) -> syn::Result<ReconcilerArgs> {
    ReconcilerArgs::from_input(&input)
}

fn error(input: DeriveInput) -> String {
    match parse(input) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_full_option_set_parses() {
    let args = parse(parse_quote! {
        #[controller(for = Foo, owns(Deployment, ConfigMap), watches(Secret, map = Self::secret_to_foos),
                     max_concurrent = 4, finalizer = "samplecontroller.k8s.io/cleanup",
                     predicate = generation_changed, name = "foo-controller", leader_election)]
        #[rbac(group = "", resources(pods, "pods/log"), verbs(get, list))]
        #[rbac(group = "", resources(configmaps), verbs(get), names("settings"))]
        struct FooReconciler;
    })
    .unwrap();
    assert_eq!(args.owns.len(), 2);
    assert_eq!(args.watches.len(), 1);
    assert_eq!(
        args.max_concurrent
            .unwrap()
            .base10_parse::<usize>()
            .unwrap(),
        4
    );
    assert_eq!(
        args.finalizer.unwrap().value(),
        "samplecontroller.k8s.io/cleanup"
    );
    assert!(matches!(args.predicate, Some(PredicateArg::Known(ref i)) if i == "GenerationChanged"));
    assert_eq!(args.name.unwrap().value(), "foo-controller");
    assert!(args.leader_election);
    assert_eq!(args.rbac.len(), 2);
    assert_eq!(args.rbac[0].resources[1].value(), "pods/log");
    assert_eq!(args.rbac[1].names[0].value(), "settings");
}

#[test]
fn options_may_be_split_over_attributes() {
    let args = parse(parse_quote! {
        #[controller(for = Foo)]
        #[controller(owns(Deployment))]
        #[controller(owns(Service), predicate = my_filter())]
        struct R;
    })
    .unwrap();
    assert_eq!(args.owns.len(), 2);
    assert!(matches!(args.predicate, Some(PredicateArg::Expr(_))));
    assert!(!args.leader_election);
}

#[test]
fn missing_for_is_an_error() {
    assert!(
        error(parse_quote! { #[controller(owns(Deployment))] struct R; })
            .contains("missing `for = Kind`")
    );
    assert!(error(parse_quote! { struct R; }).contains("missing `for = Kind`"));
}

#[test]
fn unknown_options_suggest_the_closest() {
    assert_eq!(
        error(parse_quote! { #[controller(for = Foo, onws(Deployment))] struct R; }),
        "unknown controller option `onws`; did you mean `owns`?"
    );
    assert_eq!(
        error(parse_quote! { #[controller(for = Foo, max_concurrency = 2)] struct R; }),
        "unknown controller option `max_concurrency`; did you mean `max_concurrent`?"
    );
    assert!(
        error(parse_quote! { #[controller(for = Foo, predicate = generaton_changed)] struct R; })
            .starts_with(
                "unknown predicate `generaton_changed`; did you mean `generation_changed`?"
            )
    );
    assert_eq!(
        error(
            parse_quote! { #[controller(for = Foo)] #[rbac(group = "", resource(pods), verbs(get))] struct R; }
        ),
        "unknown rbac option `resource`; did you mean `resources`?"
    );
    assert_eq!(
        error(
            parse_quote! { #[controller(for = Foo)] #[rbac(group = "", resources(pods), verbs(gte))] struct R; }
        ),
        "unknown verb `gte`; did you mean `get`?"
    );
    assert_eq!(
        error(parse_quote! { #[controller(for = Foo, watches(Secret, mpa = f))] struct R; }),
        "unknown `watches` option `mpa`; did you mean `map`?"
    );
}

#[test]
fn duplicates_are_errors() {
    assert_eq!(
        error(
            parse_quote! { #[controller(for = Foo, owns(Deployment), owns(Deployment))] struct R; }
        ),
        "duplicate `owns` kind `Deployment`"
    );
    assert_eq!(
        error(parse_quote! { #[controller(for = Foo, name = "a", name = "b")] struct R; }),
        "duplicate option `name`"
    );
    // A kind may own objects of its own kind (a ConfigMap mirrored into
    // another), as in controller-runtime.
    assert!(parse(parse_quote! { #[controller(for = Foo, owns(Foo))] struct R; }).is_ok());
}

#[test]
fn values_are_checked() {
    assert!(
        error(parse_quote! { #[controller(for = Foo, watches(Secret))] struct R; })
            .starts_with("`watches` needs a map function")
    );
    assert_eq!(
        error(parse_quote! { #[controller(for = Foo, max_concurrent = 0)] struct R; }),
        "`max_concurrent` must be at least 1"
    );
    assert!(
        error(parse_quote! { #[controller(for = Foo, finalizer = "cleanup")] struct R; })
            .contains("must be a domain-qualified name")
    );
    assert!(
        error(parse_quote! { #[controller(for = Foo)] #[rbac(group = "")] struct R; })
            .starts_with("`#[rbac]` needs `resources`")
    );
}

#[test]
fn webhooks_parse_with_policy_and_service() {
    let args = parse(parse_quote! {
        #[controller(for = Foo, webhooks(defaulting, validating, conversion, failure_policy = "Ignore", timeout_seconds = 30, service = "demo-webhook-service"))]
        struct R;
    })
    .unwrap();
    let w = args.webhooks.unwrap();
    assert!(w.defaulting && w.validating && w.conversion);
    assert_eq!(w.failure_policy.unwrap(), "Ignore");
    assert_eq!(w.timeout_seconds.unwrap().base10_digits(), "30");
    assert_eq!(w.service.unwrap().value(), "demo-webhook-service");
    let plain =
        parse(parse_quote! { #[controller(for = Foo, webhooks(validating))] struct R; }).unwrap();
    let w = plain.webhooks.unwrap();
    assert!(w.validating && !w.defaulting && w.failure_policy.is_none());
    assert!(w.timeout_seconds.is_none());
}

#[test]
fn webhook_timeouts_outside_the_api_servers_range_are_refused() {
    for bad in [quote::quote!(0), quote::quote!(31), quote::quote!(300)] {
        let e = error(
            parse_quote! { #[controller(for = Foo, webhooks(validating, timeout_seconds = #bad))] struct R; },
        );
        assert!(e.contains("between 1 and 30"), "{bad}: {e}");
    }
    let e = error(
        parse_quote! { #[controller(for = Foo, webhooks(validating, timeout_seconds = 1, timeout_seconds = 2))] struct R; },
    );
    assert!(e.contains("duplicate option `timeout_seconds`"), "{e}");
    let e = error(
        parse_quote! { #[controller(for = Foo, webhooks(validating, timeout_secs = 5))] struct R; },
    );
    assert!(e.contains("did you mean `timeout_seconds`"), "{e}");
}

#[test]
fn webhook_mistakes_are_named() {
    let e = error(parse_quote! { #[controller(for = Foo, webhooks(validatng))] struct R; });
    assert!(e.contains("did you mean `validating`"), "{e}");
    let e = error(
        parse_quote! { #[controller(for = Foo, webhooks(validating, failure_policy = "ignore"))] struct R; },
    );
    assert!(e.contains("did you mean `Ignore`"), "{e}");
    let e = error(
        parse_quote! { #[controller(for = Foo, webhooks(failure_policy = "Fail"))] struct R; },
    );
    assert!(e.contains("at least one of"), "{e}");
    let e = error(parse_quote! { #[controller(for = Foo, webhooks())] struct R; });
    assert!(e.contains("at least one of"), "{e}");
    let e = error(
        parse_quote! { #[controller(for = Foo, webhooks(validating, validating))] struct R; },
    );
    assert!(e.contains("given twice"), "{e}");
    let e = error(
        parse_quote! { #[controller(for = Foo, webhooks(validating, service = "Web_Hooks"))] struct R; },
    );
    assert!(e.contains("must be a Service name"), "{e}");
    let e = error(
        parse_quote! { #[controller(for = Foo, webhooks(validating), webhooks(defaulting))] struct R; },
    );
    assert!(e.contains("duplicate option `webhooks`"), "{e}");
    let e = error(parse_quote! { #[controller(for = Foo, webhook(validating))] struct R; });
    assert!(e.contains("did you mean `webhooks`"), "{e}");
}
