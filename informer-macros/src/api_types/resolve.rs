//! Walking a JSONPath's segments through the module's types: each segment
//! must name a serialized field of the struct reached so far. The walk
//! stops (accepting the rest) wherever the module no longer says what lies
//! below — the runtime check against the finished schema covers that part.

use super::types::{Field, Shape, TypeDef, TypeTable};
use crate::custom_resource::names::did_you_mean;

/// How a path treats lists on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lists {
    /// Printer columns, scale paths, selectable fields: the runtime check
    /// refuses a dotted segment below an array, so this does too.
    Refuse,
    /// Index paths: every item of a list is indexed.
    StepInto,
}

/// The first segment that names nothing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// Index into the segments given to [`resolve`].
    pub at: usize,
    /// The message, with "did you mean" where a name is close.
    pub message: String,
}

/// The serialized fields of a module struct, flattened structs merged in,
/// and whether names it does not list may exist (an open flatten).
fn fields_of(table: &TypeTable, name: &str, depth: usize) -> (Vec<Field>, bool) {
    let Some(TypeDef::Fields {
        fields,
        flattened,
        open,
    }) = table.def(name)
    else {
        return (Vec::new(), true);
    };
    let mut out = fields.clone();
    let mut open = *open;
    for ty in flattened {
        match table.shape(ty) {
            Shape::Struct(inner) if depth < 16 => {
                let (more, more_open) = fields_of(table, &inner, depth + 1);
                out.extend(more);
                open |= more_open;
            }
            _ => open = true,
        }
    }
    (out, open)
}

/// Resolves `segments` (below `.spec` or `.status`, whose path so far is
/// `prefix`) starting from `start`.
pub fn resolve(
    table: &TypeTable,
    start: Shape,
    prefix: &str,
    segments: &[String],
    lists: Lists,
) -> Result<(), Unresolved> {
    let mut shape = start;
    let mut seen = prefix.to_owned();
    for (at, seg) in segments.iter().enumerate() {
        loop {
            match shape {
                Shape::List(inner) if lists == Lists::StepInto => shape = *inner,
                _ => break,
            }
        }
        match shape {
            Shape::Open => return Ok(()),
            Shape::Struct(name) => {
                let (fields, open) = fields_of(table, &name, 0);
                match fields.iter().find(|f| f.json == *seg) {
                    Some(Field { ty: Some(ty), .. }) => shape = table.shape(ty),
                    Some(Field { ty: None, .. }) => return Ok(()),
                    None if open => return Ok(()),
                    None => {
                        let names: Vec<&str> = fields.iter().map(|f| f.json.as_str()).collect();
                        return Err(Unresolved {
                            at,
                            message: format!(
                                "`{seen}` (`{name}`) has no field `{seg}` (fields are named as serde serializes them){}",
                                did_you_mean(seg, &names)
                            ),
                        });
                    }
                }
            }
            Shape::List(_) => {
                return Err(Unresolved {
                    at,
                    message: format!(
                        "`{seen}` is a list: a dotted path cannot name `{seg}` inside its items (the schema is an array)"
                    ),
                });
            }
            Shape::Scalar(kind) => {
                return Err(Unresolved {
                    at,
                    message: format!("`{seen}` is a {kind}: it has no field `{seg}`"),
                });
            }
        }
        seen.push('.');
        seen.push_str(seg);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(src: &str) -> TypeTable {
        let file: syn::File = syn::parse_str(src).expect("test source parses");
        TypeTable::from_items(&file.items)
    }

    fn check(t: &TypeTable, root: &str, path: &str, lists: Lists) -> Result<(), Unresolved> {
        let segs: Vec<String> = path.split('.').map(str::to_owned).collect();
        resolve(t, Shape::Struct(root.into()), ".spec", &segs, lists)
    }

    const TYPES: &str = r#"
        use external::Quantity;
        #[derive(Serialize, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        struct Spec {
            template: Option<Box<Template>>,
            replica_count: i32,
            ports: Vec<Port>,
            labels: BTreeMap<String, String>,
            size: Quantity,
            other: crate::elsewhere::Thing,
            #[serde(rename = "img")]
            image_ref: Option<ImageRef>,
            #[serde(skip)]
            cache: String,
            #[serde(with = "custom")]
            custom: Template,
            wrapped: Wrapper,
            mode: Mode,
            #[serde(flatten)]
            extra: Extra,
        }
        #[derive(JsonSchema)]
        struct Template { image: String, pull: Option<Policy> }
        #[derive(JsonSchema)]
        #[serde(rename_all = "camelCase")]
        struct Port { container_port: i32 }
        #[derive(JsonSchema)]
        struct ImageRef { name: String }
        #[derive(JsonSchema)]
        struct Wrapper(Template);
        #[derive(JsonSchema)]
        enum Mode { A, B }
        #[derive(JsonSchema)]
        struct Extra { note: String }
        struct Policy { always: bool }
        #[derive(JsonSchema)]
        struct Open { #[serde(flatten)] rest: BTreeMap<String, String>, known: i32 }
        #[derive(JsonSchema)]
        struct Generic<T> { t: T }
    "#;

    #[test]
    fn nested_fields_resolve_through_option_box_and_newtypes() {
        let t = table(TYPES);
        for ok in [
            "template.image",
            "template.pull",
            "replicaCount",
            "img.name",
            "wrapped.image",
            "note",
        ] {
            assert_eq!(check(&t, "Spec", ok, Lists::Refuse), Ok(()), "{ok}");
        }
    }

    #[test]
    fn a_typo_below_the_first_level_is_found_with_a_suggestion() {
        let t = table(TYPES);
        let e = check(&t, "Spec", "template.imag", Lists::Refuse).unwrap_err();
        assert_eq!(e.at, 1);
        assert!(
            e.message
                .contains("`.spec.template` (`Template`) has no field `imag`"),
            "{}",
            e.message
        );
        assert!(e.message.contains("did you mean `image`?"), "{}", e.message);
        let e = check(&t, "Spec", "img.nam", Lists::Refuse).unwrap_err();
        assert!(e.message.contains("did you mean `name`?"), "{}", e.message);
    }

    #[test]
    fn serde_renames_are_the_names_and_rust_names_are_refused() {
        let t = table(TYPES);
        let e = check(&t, "Spec", "replica_count", Lists::Refuse).unwrap_err();
        assert!(
            e.message.contains("did you mean `replicaCount`?"),
            "{}",
            e.message
        );
        let e = check(&t, "Spec", "imageRef.name", Lists::Refuse).unwrap_err();
        assert_eq!(e.at, 0);
        assert!(
            check(&t, "Spec", "cache", Lists::Refuse).is_err(),
            "skipped field"
        );
    }

    #[test]
    fn lists_are_refused_for_columns_and_stepped_into_for_indexes() {
        let t = table(TYPES);
        let e = check(&t, "Spec", "ports.containerPort", Lists::Refuse).unwrap_err();
        assert!(
            e.message.contains("`.spec.ports` is a list"),
            "{}",
            e.message
        );
        assert_eq!(
            check(&t, "Spec", "ports.containerPort", Lists::StepInto),
            Ok(())
        );
        let e = check(&t, "Spec", "ports.containerPrt", Lists::StepInto).unwrap_err();
        assert!(
            e.message.contains("did you mean `containerPort`?"),
            "{}",
            e.message
        );
        assert_eq!(check(&t, "Spec", "ports", Lists::Refuse), Ok(()));
    }

    #[test]
    fn scalars_have_no_fields() {
        let t = table(TYPES);
        let e = check(&t, "Spec", "template.image.tag", Lists::Refuse).unwrap_err();
        assert_eq!(e.at, 2);
        assert!(
            e.message.contains("`.spec.template.image` is a string"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_walk_stops_where_the_module_stops_knowing() {
        let t = table(TYPES);
        for open in [
            "labels.anything",        // map
            "size.anything",          // imported type
            "other.anything",         // path out of the module
            "custom.anything",        // serde(with)
            "mode.anything",          // enum
            "template.pull.anything", // struct without JsonSchema derive
        ] {
            assert_eq!(check(&t, "Spec", open, Lists::Refuse), Ok(()), "{open}");
        }
        assert_eq!(check(&t, "Open", "whatever", Lists::Refuse), Ok(()));
        assert_eq!(check(&t, "Generic", "whatever", Lists::Refuse), Ok(()));
    }

    #[test]
    fn a_flatten_into_a_module_struct_merges_its_fields() {
        let t = table(TYPES);
        let e = check(&t, "Spec", "nte", Lists::Refuse).unwrap_err();
        assert!(e.message.contains("did you mean `note`?"), "{}", e.message);
    }

    #[test]
    fn imported_names_shadow_std() {
        let t = table(
            r#"use my::String;
            #[derive(JsonSchema)] struct S { a: String, b: std::string::String }"#,
        );
        assert_eq!(check(&t, "S", "a.x", Lists::Refuse), Ok(()));
        assert_eq!(check(&t, "S", "b.x", Lists::Refuse), Ok(()));
    }
}
