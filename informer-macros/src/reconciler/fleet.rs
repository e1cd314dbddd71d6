//! `fleet` in `#[controller(...)]`: the derived controller can also run
//! over the manager's fleet of clusters (`setup_fleet`, or
//! `setup_hub_and_fleet` for the manager's own cluster too; with `sharding`,
//! also over a ring's replicas, `setup_fleet_sharded`), with the RBAC of
//! each member cluster (`fleet_member_permissions`, `fleet_member_rbac`)
//! apart from the manager's own cluster's (`fleet_hub_permissions`,
//! `fleet_hub_rbac`). Parsing the flag is in [`attrs`](super::attrs).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::attrs::ReconcilerArgs;

/// The member clusters' permissions: the wiring's kinds, events and the
/// extra `#[rbac]` rules; no Lease (leader election happens in the
/// manager's own cluster) and no webhook certificate rule.
fn member_permissions(args: &ReconcilerArgs) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let for_ = &args.for_;
    let mut calls = vec![quote_spanned!(for_.span()=> .primary::<#for_>())];
    for kind in &args.owns {
        calls.push(quote_spanned!(kind.span()=> .owns::<#kind>()));
    }
    for w in &args.watches {
        let kind = &w.kind;
        calls.push(quote_spanned!(kind.span()=> .watches::<#kind>()));
    }
    calls.push(quote!(.events()));
    for rule in &args.rbac {
        let group = &rule.group;
        let verbs = &rule.verbs;
        let names = &rule.names;
        let names = if names.is_empty() {
            quote!(::core::iter::empty::<&str>())
        } else {
            quote!([#(#names),*])
        };
        for resource in &rule.resources {
            calls.push(quote!(.named_rule(#group, #resource, #names, [#(#verbs),*])));
        }
    }
    quote!(#cr::rbac::Permissions::new() #(#calls)*)
}

/// `setup_fleet` and the fleet's RBAC items, when `fleet` is declared.
/// `calls` are `setup`'s builder calls after `owns` (watches, workers,
/// event filter), `reconciler` what it completes with.
pub fn items(
    args: &ReconcilerArgs,
    owned: &[TokenStream],
    calls: &[TokenStream],
    reconciler: &TokenStream,
) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let for_ = &args.for_;
    if args.fleet.is_none() {
        return TokenStream::new();
    }
    let members = member_permissions(args);
    let wiring = quote!(#(#owned)* #(#calls)* .complete(#reconciler));
    let leases = if args.leader_election {
        quote!(.leases())
    } else if args.sharding.is_some() {
        quote!(.sharded_leases())
    } else {
        TokenStream::new()
    };
    let sharded = args
        .sharding
        .as_ref()
        .map(|_| setup_fleet_sharded(args, owned, calls, reconciler));
    quote! {
        /// Registers this reconciler as a fleet controller of `mgr`: the
        /// wiring of [`Self::setup`] (finalizer included), applied in
        /// every cluster of the manager's fleet, each reconcile getting
        /// its cluster's client, cache and recorder. The manager's own
        /// cluster is not reconciled by it ([`Self::setup`] does that).
        /// The member clusters need [`Self::fleet_member_rbac`], the
        /// manager's own cluster [`Self::fleet_hub_rbac`].
        pub fn setup_fleet(
            self,
            mgr: &#cr::manager::Manager,
        ) -> ::core::result::Result<#cr::controller::FleetController, #cr::manager::ManagerError> {
            mgr.fleet_controller::<#for_>()
                .named(Self::CONTROLLER_NAME)
                #wiring
        }

        /// Registers this reconciler as one controller of `mgr` for the
        /// manager's own cluster and every cluster of its fleet (one
        /// name, one queue, one set of workers): the wiring of
        /// [`Self::setup`] in each, instead of calling both `setup` and
        /// [`Self::setup_fleet`]. In the manager's own cluster
        /// `ctx.cluster()` is `""`. The manager's own cluster needs
        /// [`Self::rbac`] besides [`Self::fleet_hub_rbac`].
        pub fn setup_hub_and_fleet(
            self,
            mgr: &#cr::manager::Manager,
        ) -> ::core::result::Result<#cr::controller::FleetController, #cr::manager::ManagerError> {
            mgr.fleet_controller::<#for_>()
                .named(Self::CONTROLLER_NAME)
                .engage_local_cluster()
                #wiring
        }

        /// What the controller needs in each member cluster of the
        /// fleet: the kinds it is for, owns and watches, events and the
        /// `#[rbac]` rules (no Lease: leader election happens in the
        /// manager's own cluster).
        pub fn fleet_member_permissions() -> #cr::rbac::Permissions {
            #members
        }

        /// The `ClusterRole`, named after the controller, to bind in each
        /// member cluster to the identity its kubeconfig names.
        pub fn fleet_member_rbac() -> #cr::rbac::ClusterRole {
            Self::fleet_member_permissions().cluster_role(Self::CONTROLLER_NAME)
        }

        #sharded

        /// What running the fleet needs in the manager's own (hub)
        /// cluster: reading the kubeconfig Secrets of a
        /// `cluster::SecretProvider`, and the leader-election Lease when
        /// `leader_election` is declared (the shard Leases when `sharding`
        /// is). A `StaticProvider` needs none of the Secret rules.
        pub fn fleet_hub_permissions() -> #cr::rbac::Permissions {
            #cr::cluster::SecretProvider::permissions() #leases
        }

        /// [`Self::fleet_hub_permissions`] as a `Role` in `namespace` (the
        /// cluster Secrets' namespace, which should be the leader-election
        /// namespace too), named after the controller.
        pub fn fleet_hub_rbac(namespace: &str) -> #cr::rbac::Role {
            Self::fleet_hub_permissions().role(Self::CONTROLLER_NAME, namespace)
        }
    }
}

/// `setup_fleet_sharded`: `setup_fleet`'s wiring spread over the replicas
/// of a ring (filter mode, the only one a fleet controller shards in).
fn setup_fleet_sharded(
    args: &ReconcilerArgs,
    owned: &[TokenStream],
    calls: &[TokenStream],
    reconciler: &TokenStream,
) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let for_ = &args.for_;
    quote! {
        /// Registers this reconciler as a fleet controller of `mgr`, as
        /// [`Self::setup_fleet`] does, with its `(cluster, namespace,
        /// name)`s spread over the replicas of `config`'s ring in filter
        /// mode (`config`'s own mode is replaced by it). Each replica calls
        /// it with its own identity; the shard Leases live in the manager's
        /// own cluster ([`Self::fleet_hub_rbac`] has their rules).
        pub fn setup_fleet_sharded(
            self,
            mgr: &#cr::manager::Manager,
            config: #cr::sharding::config::ShardingConfig,
        ) -> ::core::result::Result<#cr::controller::FleetController, #cr::manager::ManagerError> {
            #cr::__private::require_sharding!();
            let membership = #cr::sharding::membership::Membership::new(
                mgr.client(),
                config.mode(#cr::sharding::config::ShardMode::Filter),
            )?;
            #cr::sharding::fleet::ShardedFleetExt::sharded(
                mgr.fleet_controller::<#for_>()
                    .named(Self::CONTROLLER_NAME)
                    #(#owned)*
                    #(#calls)*,
                &membership,
            )
            .complete(#reconciler)
        }
    }
}
