//! Table-driven decisions: mode × server policy × annotations × trust × allow/deny lists × rules ×
//! approver × source, through the real gate with a counting dispatcher.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use warden_hooks::HookRunner;
use warden_policy::{
    ApprovalAnswer, Approver, AuthorizationRule, CallSurface, CapabilityClass, CapabilitySet,
    Decision, Gate, GateParts, GatePolicy, Layer, NoApprover, PermissionMode, Permissions,
    RuleDecision, ServerPolicy, ToolAnnotations, ToolGlob,
};

use CapabilityClass::{Destructive as D, External as E, ReadOnly as RO, Write as W};

use crate::support::{
    self, FileDispatcher, MemoryAudit, ScriptedApprover, StaticCatalog, annotations, mcp_tool,
    request,
};

const TOOL: &str = "mcp__srv__thing";

fn set(classes: &[CapabilityClass]) -> CapabilitySet {
    CapabilitySet::of(classes)
}

// ---- the dimensions, each with its literal expectation ----

/// (name, annotations, classes when trusted); untrusted is always destructive + external.
fn annotation_cases() -> Vec<(&'static str, ToolAnnotations, CapabilitySet)> {
    vec![
        ("none", annotations(None, None, None), set(&[D, E])),
        (
            "read-only closed",
            annotations(Some(true), None, Some(false)),
            set(&[RO]),
        ),
        (
            "read-only open",
            annotations(Some(true), None, None),
            set(&[RO, E]),
        ),
        (
            "write closed",
            annotations(Some(false), Some(false), Some(false)),
            set(&[W]),
        ),
        (
            "destructive closed",
            annotations(Some(false), Some(true), Some(false)),
            set(&[D]),
        ),
    ]
}

/// (name, policy, classes it admits for the tool).
fn policy_cases() -> Vec<(&'static str, ServerPolicy, CapabilitySet)> {
    let tool_entry = |classes| BTreeMap::from([("thing".to_owned(), classes)]);
    vec![
        ("open", ServerPolicy::default(), CapabilitySet::ALL),
        (
            "server read_only",
            ServerPolicy {
                capabilities: Some(set(&[RO])),
                tools: BTreeMap::new(),
            },
            set(&[RO]),
        ),
        (
            "server read_only+external",
            ServerPolicy {
                capabilities: Some(set(&[RO, E])),
                tools: BTreeMap::new(),
            },
            set(&[RO, E]),
        ),
        (
            "server read_only+write",
            ServerPolicy {
                capabilities: Some(set(&[RO, W])),
                tools: BTreeMap::new(),
            },
            set(&[RO, W]),
        ),
        (
            "tool entry read_only",
            ServerPolicy {
                capabilities: None,
                tools: tool_entry(set(&[RO])),
            },
            set(&[RO]),
        ),
        (
            "narrow server, wide tool entry",
            ServerPolicy {
                capabilities: Some(set(&[RO, E])),
                tools: tool_entry(CapabilitySet::ALL),
            },
            set(&[RO, E]),
        ),
    ]
}

fn mode_ceiling(mode: PermissionMode) -> CapabilitySet {
    match mode {
        PermissionMode::Ask | PermissionMode::Auto => CapabilitySet::ALL,
        PermissionMode::ReadOnly => set(&[RO, E]),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lists {
    None,
    Allow,
    Deny,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Rules {
    None,
    AllowThenDenyAll,
    DenyThis,
    DenyOther,
}

fn rules(kind: Rules) -> Vec<AuthorizationRule> {
    let rule = |tools: &str, decision, reason: Option<&str>| AuthorizationRule {
        tools: ToolGlob::parse(tools).unwrap(),
        decision,
        reason: reason.map(str::to_owned),
    };
    match kind {
        Rules::None => Vec::new(),
        Rules::AllowThenDenyAll => vec![
            rule(TOOL, RuleDecision::Allow, None),
            rule("*", RuleDecision::Deny, Some("nothing else")),
        ],
        Rules::DenyThis => vec![rule(
            "mcp__srv__*",
            RuleDecision::Deny,
            Some("srv is frozen"),
        )],
        Rules::DenyOther => vec![rule("mcp__other__*", RuleDecision::Deny, None)],
    }
}

fn permissions(mode: PermissionMode, lists: Lists) -> Permissions {
    let this = || vec![ToolGlob::parse("mcp__srv__*").unwrap()];
    let (allow, deny) = match lists {
        Lists::None => (Vec::new(), Vec::new()),
        Lists::Allow => (this(), Vec::new()),
        Lists::Deny => (Vec::new(), this()),
        Lists::Both => (this(), this()),
    };
    Permissions {
        mode,
        allow,
        deny,
        ..Permissions::default()
    }
}

/// The expected outcome, read off the issue: (decision, layer, person asked, visible).
#[allow(clippy::too_many_arguments)]
fn expected(
    classes: CapabilitySet,
    admitted_by_policy: CapabilitySet,
    mode: PermissionMode,
    lists: Lists,
    rule_kind: Rules,
    person: bool,
    source: CallSurface,
) -> (Decision, Layer, bool, bool) {
    let admitted = mode_ceiling(mode).intersection(admitted_by_policy);
    let deny_listed = matches!(lists, Lists::Deny | Lists::Both);
    let allow_listed = matches!(lists, Lists::Allow | Lists::Both);
    let visible = classes.is_subset(admitted) && rule_kind != Rules::DenyThis && !deny_listed;
    let read_only = classes.contains(RO) && !classes.contains(W) && !classes.contains(D);
    if !classes.is_subset(admitted) {
        return (Decision::Denied, Layer::Authorization, false, visible);
    }
    if rule_kind == Rules::DenyThis {
        return (Decision::Denied, Layer::Rule, false, visible);
    }
    if deny_listed {
        return (Decision::Denied, Layer::Approval, false, visible);
    }
    if source == CallSurface::CodeMode && !read_only {
        return (Decision::Denied, Layer::Approval, false, visible);
    }
    // An external tool asks in every mode unless the allow list names it.
    let needs_person = !allow_listed
        && (classes.contains(E)
            || match mode {
                PermissionMode::Ask => !read_only,
                PermissionMode::Auto => classes.contains(D),
                PermissionMode::ReadOnly => false,
            });
    if !needs_person {
        return (Decision::Allowed, Layer::Approval, false, visible);
    }
    if source == CallSurface::CodeMode {
        return (Decision::Denied, Layer::Approval, false, visible);
    }
    if person {
        (Decision::Allowed, Layer::Approval, true, visible)
    } else {
        (Decision::Denied, Layer::Approval, false, visible)
    }
}

#[tokio::test]
async fn every_combination_decides_as_the_issue_says() {
    let mut checked = 0;
    for (annotation_name, tool_annotations, trusted_classes) in annotation_cases() {
        for trust in [true, false] {
            let classes = if trust { trusted_classes } else { set(&[D, E]) };
            for (policy_name, server_policy, policy_admits) in policy_cases() {
                for mode in [
                    PermissionMode::Ask,
                    PermissionMode::ReadOnly,
                    PermissionMode::Auto,
                ] {
                    for lists in [Lists::None, Lists::Allow, Lists::Deny, Lists::Both] {
                        for rule_kind in [
                            Rules::None,
                            Rules::AllowThenDenyAll,
                            Rules::DenyThis,
                            Rules::DenyOther,
                        ] {
                            let mut descriptor = mcp_tool("srv", "thing", tool_annotations);
                            descriptor.trust_annotations = trust;
                            descriptor.server_policy = server_policy.clone();
                            let policy = GatePolicy {
                                permissions: permissions(mode, lists),
                                rules: rules(rule_kind),
                                ..GatePolicy::default()
                            };
                            for person in [false, true] {
                                let scripted =
                                    Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowOnce));
                                let approver: Arc<dyn Approver> = if person {
                                    scripted.clone()
                                } else {
                                    Arc::new(NoApprover)
                                };
                                let dispatcher = Arc::new(FileDispatcher::default());
                                let audit = Arc::new(MemoryAudit::default());
                                let gate = Gate::new(GateParts {
                                    catalog: Arc::new(StaticCatalog::of(vec![descriptor.clone()])),
                                    dispatcher: dispatcher.clone(),
                                    approver,
                                    audit: audit.clone(),
                                    hooks: HookRunner::default(),
                                    policy: policy.clone(),
                                    cwd: std::env::temp_dir(),
                                });
                                for source in [CallSurface::Agent, CallSurface::CodeMode] {
                                    let case = format!(
                                        "annotations={annotation_name} trust={trust} policy={policy_name} mode={mode:?} \
                                         lists={lists:?} rules={rule_kind:?} person={person} source={source}"
                                    );
                                    let (decision, layer, asked, visible) = expected(
                                        classes,
                                        policy_admits,
                                        mode,
                                        lists,
                                        rule_kind,
                                        person,
                                        source,
                                    );
                                    let before =
                                        (dispatcher.count(), audit.len(), scripted.asked());
                                    let outcome = gate
                                        .call(request(source, TOOL, json!({"path": "/x"})))
                                        .await;
                                    assert_eq!(outcome.classes, classes, "classes: {case}");
                                    assert_eq!(
                                        (outcome.decision, outcome.layer),
                                        (decision, layer),
                                        "{case}: {:?}",
                                        outcome.reason
                                    );
                                    assert_eq!(
                                        gate.visible(&descriptor),
                                        visible,
                                        "visible: {case}"
                                    );
                                    let ran = usize::from(decision == Decision::Allowed);
                                    assert_eq!(
                                        dispatcher.count() - before.0,
                                        ran,
                                        "dispatches: {case}"
                                    );
                                    assert_eq!(audit.len() - before.1, 1, "audit records: {case}");
                                    assert_eq!(
                                        scripted.asked() - before.2,
                                        usize::from(asked),
                                        "asked: {case}"
                                    );
                                    if decision == Decision::Denied {
                                        assert!(
                                            outcome
                                                .reason
                                                .as_deref()
                                                .is_some_and(|r| !r.is_empty()),
                                            "reason: {case}"
                                        );
                                        assert!(
                                            outcome.is_error()
                                                && outcome
                                                    .model_text()
                                                    .starts_with("Tool call denied")
                                        );
                                    }
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 5 * 2 * 6 * 3 * 4 * 4 * 2 * 2);
}

/// Hand-written rows with literal expectations (no oracle): the cases the issue names.
#[tokio::test]
async fn named_cases() {
    struct Row {
        name: &'static str,
        mode: PermissionMode,
        annotations: ToolAnnotations,
        trust: bool,
        policy: ServerPolicy,
        allow: &'static [&'static str],
        deny: &'static [&'static str],
        always_ask: CapabilitySet,
        surface: CallSurface,
        person: bool,
        expect: (Decision, Layer),
        reason_contains: &'static str,
    }
    let base = || Row {
        name: "",
        mode: PermissionMode::Ask,
        annotations: annotations(None, None, None),
        trust: true,
        policy: ServerPolicy::default(),
        allow: &[],
        deny: &[],
        always_ask: set(&[D]),
        surface: CallSurface::Agent,
        person: false,
        expect: (Decision::Allowed, Layer::Approval),
        reason_contains: "",
    };
    let ro_open = annotations(Some(true), None, None);
    let ro_closed = annotations(Some(true), None, Some(false));
    let destructive = annotations(Some(false), Some(true), Some(false));
    let write = annotations(Some(false), Some(false), Some(false));
    let rows = vec![
        Row {
            name: "headless ask: destructive is denied, nobody to ask",
            annotations: destructive,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "nobody to ask",
            ..base()
        },
        Row {
            name: "ask: read-only but external asks, and headless that is a denial naming the flag",
            annotations: ro_open,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "--allowed-tools mcp__srv__thing",
            ..base()
        },
        Row {
            name: "ask: read-only and closed-world runs",
            annotations: ro_closed,
            reason_contains: "read-only tool in ask mode",
            ..base()
        },
        Row {
            name: "ask + allow list runs a destructive tool headless",
            annotations: destructive,
            allow: &["mcp__srv__thing"],
            reason_contains: "allow list",
            ..base()
        },
        Row {
            name: "deny wins over allow",
            annotations: ro_closed,
            allow: &["mcp__srv__*"],
            deny: &["*thing"],
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "deny list",
            ..base()
        },
        Row {
            name: "read-only mode denies write at authorization",
            mode: PermissionMode::ReadOnly,
            annotations: write,
            expect: (Decision::Denied, Layer::Authorization),
            reason_contains: "not admitted: write",
            ..base()
        },
        Row {
            name: "read-only mode asks for read-only+external, headless that is a denial",
            mode: PermissionMode::ReadOnly,
            annotations: ro_open,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "external",
            ..base()
        },
        Row {
            name: "read-only mode runs read-only+external the allow list names",
            mode: PermissionMode::ReadOnly,
            annotations: ro_open,
            allow: &["mcp__srv__thing"],
            reason_contains: "allow list",
            ..base()
        },
        Row {
            name: "code mode refuses read-only+external unless the allow list names it",
            mode: PermissionMode::Auto,
            annotations: ro_open,
            surface: CallSurface::CodeMode,
            person: true,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "never asks",
            ..base()
        },
        Row {
            name: "read-only mode: allow list does not widen",
            mode: PermissionMode::ReadOnly,
            annotations: destructive,
            allow: &["*"],
            expect: (Decision::Denied, Layer::Authorization),
            reason_contains: "read-only",
            ..base()
        },
        Row {
            name: "auto runs write headless",
            mode: PermissionMode::Auto,
            annotations: write,
            reason_contains: "auto mode",
            ..base()
        },
        Row {
            name: "auto asks for destructive (default always_ask)",
            mode: PermissionMode::Auto,
            annotations: destructive,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "nobody to ask",
            ..base()
        },
        Row {
            name: "auto with a person: destructive approved",
            mode: PermissionMode::Auto,
            annotations: destructive,
            person: true,
            reason_contains: "approved by the user",
            ..base()
        },
        Row {
            name: "auto always_ask external asks for read-only+external",
            mode: PermissionMode::Auto,
            annotations: ro_open,
            always_ask: set(&[E]),
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "nobody to ask",
            ..base()
        },
        Row {
            name: "untrusted read-only hint does not relax",
            annotations: ro_closed,
            trust: false,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "destructive,external",
            ..base()
        },
        Row {
            name: "untrusted read-only hint in read-only mode: hidden and denied",
            mode: PermissionMode::ReadOnly,
            annotations: ro_closed,
            trust: false,
            expect: (Decision::Denied, Layer::Authorization),
            reason_contains: "not admitted: destructive",
            ..base()
        },
        Row {
            name: "server read_only denies read-only+external (partial admission)",
            annotations: ro_open,
            policy: ServerPolicy {
                capabilities: Some(set(&[RO])),
                tools: BTreeMap::new(),
            },
            expect: (Decision::Denied, Layer::Authorization),
            reason_contains: "not admitted: external",
            ..base()
        },
        Row {
            name: "wider tool entry widens nothing",
            annotations: write,
            policy: ServerPolicy {
                capabilities: Some(set(&[RO, E])),
                tools: BTreeMap::from([("thing".to_owned(), CapabilitySet::ALL)]),
            },
            allow: &["*"],
            expect: (Decision::Denied, Layer::Authorization),
            reason_contains: "not admitted: write",
            ..base()
        },
        Row {
            name: "per-tool entry narrows an open server",
            annotations: write,
            policy: ServerPolicy {
                capabilities: None,
                tools: BTreeMap::from([("thing".to_owned(), set(&[RO]))]),
            },
            allow: &["*"],
            expect: (Decision::Denied, Layer::Authorization),
            reason_contains: "not admitted: write",
            ..base()
        },
        Row {
            name: "code mode runs read-only",
            annotations: ro_closed,
            surface: CallSurface::CodeMode,
            ..base()
        },
        Row {
            name: "code mode refuses write even when allow-listed",
            mode: PermissionMode::Auto,
            annotations: write,
            allow: &["*"],
            surface: CallSurface::CodeMode,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "code mode may call read-only tools only",
            ..base()
        },
        Row {
            name: "code mode never escalates",
            mode: PermissionMode::Auto,
            annotations: ro_closed,
            always_ask: set(&[RO]),
            surface: CallSurface::CodeMode,
            person: true,
            expect: (Decision::Denied, Layer::Approval),
            reason_contains: "never asks",
            ..base()
        },
        Row {
            name: "ask: read-only closed runs headless",
            annotations: ro_closed,
            reason_contains: "read-only tool",
            ..base()
        },
    ];
    for row in rows {
        let mut descriptor = mcp_tool("srv", "thing", row.annotations);
        descriptor.trust_annotations = row.trust;
        descriptor.server_policy = row.policy;
        let patterns = |list: &[&str]| list.iter().map(|p| ToolGlob::parse(p).unwrap()).collect();
        let policy = GatePolicy {
            permissions: Permissions {
                mode: row.mode,
                allow: patterns(row.allow),
                deny: patterns(row.deny),
                always_ask: row.always_ask,
            },
            ..GatePolicy::default()
        };
        let approver: Arc<dyn Approver> = if row.person {
            Arc::new(ScriptedApprover::new(ApprovalAnswer::AllowOnce))
        } else {
            Arc::new(NoApprover)
        };
        let h = support::harness(vec![descriptor], policy, approver, HookRunner::default());
        let outcome = h
            .gate
            .call(request(row.surface, TOOL, json!({"path": "/x"})))
            .await;
        assert_eq!(
            (outcome.decision, outcome.layer),
            row.expect,
            "{}: {:?}",
            row.name,
            outcome.reason
        );
        let reason = outcome.reason.unwrap_or_default();
        assert!(
            reason.contains(row.reason_contains),
            "{}: reason {reason:?} lacks {:?}",
            row.name,
            row.reason_contains
        );
        assert_eq!(
            h.dispatcher.count(),
            usize::from(row.expect.0 == Decision::Allowed),
            "{}",
            row.name
        );
    }
}

#[tokio::test]
async fn declared_classes_of_builtins_are_used() {
    let mut descriptor = mcp_tool("srv", "thing", annotations(Some(true), None, Some(false)));
    descriptor.identity = warden_policy::ToolIdentity::builtin("thing");
    descriptor.declared_classes = Some(set(&[W]));
    assert_eq!(descriptor.classes(), set(&[W]));
    descriptor.declared_classes = Some(CapabilitySet::EMPTY);
    assert_eq!(
        descriptor.classes(),
        set(&[D, E]),
        "an empty declaration fails closed"
    );
    let h = support::harness(
        vec![descriptor],
        GatePolicy::default(),
        Arc::new(NoApprover),
        HookRunner::default(),
    );
    let outcome = h
        .gate
        .call(request(CallSurface::Agent, TOOL, json!({"path": "/x"})))
        .await;
    assert_eq!(outcome.decision, Decision::Denied);
    assert_eq!(outcome.identity.unwrap().server(), "builtin");
}
