//! An order service that embeds warden: it registers its own tools (`list_orders`,
//! `cancel_order`) and an authorization handler that grants permissions by caller, so every call
//! — from a model, a person or an HTTP client of warden's service API — crosses warden's one
//! gate: the handler, approval, the body under its timeout, and one audit record.

mod service;

pub use service::{OrderServiceOpener, service_database};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use warden_host::{
    AuthorizationError, AuthorizationHandler, AuthorizationQuestion, AuthorizationVerdict,
    CapabilityClass, CodeTool, CodeToolDefinitionError, CodeToolError, HostTool,
};
use warden_policy::BoxFuture;

/// The permission `list_orders` requires.
pub const READ_ORDERS: &str = "orders.read";
/// The permission `cancel_order` requires.
pub const CANCEL_ORDERS: &str = "orders.cancel";
/// How long `cancel_order` may run once approved.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(30);

/// One order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Order {
    pub id: String,
    pub customer: String,
    pub status: OrderStatus,
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    Open,
    Cancelled,
}

/// The service's orders (in memory: the example has no database).
#[derive(Debug, Default)]
pub struct OrderBook {
    orders: Mutex<BTreeMap<String, Order>>,
}

impl OrderBook {
    /// A book holding these open orders, `(id, customer)`.
    pub fn with_open_orders(orders: &[(&str, &str)]) -> Arc<Self> {
        let book = Self::default();
        if let Ok(mut held) = book.orders.lock() {
            for (id, customer) in orders {
                held.insert(
                    (*id).to_owned(),
                    Order {
                        id: (*id).to_owned(),
                        customer: (*customer).to_owned(),
                        status: OrderStatus::Open,
                    },
                );
            }
        }
        Arc::new(book)
    }

    /// Every order of `customer`, or every order.
    pub fn list(&self, customer: Option<&str>) -> Result<Vec<Order>, CodeToolError> {
        let orders = self.lock()?;
        Ok(orders
            .values()
            .filter(|order| customer.is_none_or(|customer| order.customer == customer))
            .cloned()
            .collect())
    }

    /// Marks an open order cancelled.
    pub fn cancel(&self, id: &str) -> Result<Order, CodeToolError> {
        let mut orders = self.lock()?;
        let order = orders
            .get_mut(id)
            .ok_or_else(|| CodeToolError::new(format!("there is no order {id}")))?;
        if order.status == OrderStatus::Cancelled {
            return Err(CodeToolError::new(format!(
                "order {id} is already cancelled"
            )));
        }
        order.status = OrderStatus::Cancelled;
        Ok(order.clone())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, Order>>, CodeToolError> {
        self.orders
            .lock()
            .map_err(|_| CodeToolError::new("the order book is unavailable"))
    }
}

/// `list_orders`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListOrdersArguments {
    /// Only this customer's orders
    #[serde(default)]
    pub customer: Option<String>,
}

/// `cancel_order`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelOrderArguments {
    /// The order to cancel
    pub order_id: String,
}

/// The service's tools over `book`, ready for `HostOptions::tools`.
pub fn order_tools(
    book: &Arc<OrderBook>,
) -> Result<Vec<Arc<dyn HostTool>>, CodeToolDefinitionError> {
    let reader = book.clone();
    let list_orders = CodeTool::new(
        "list_orders",
        "Lists orders with their status, optionally of one customer.",
        CapabilityClass::ReadOnly,
        move |arguments: ListOrdersArguments, _call| {
            let book = reader.clone();
            async move { book.list(arguments.customer.as_deref()) }
        },
    )?
    .required_permission(READ_ORDERS);
    let canceller = book.clone();
    let cancel_order = CodeTool::new(
        "cancel_order",
        "Cancels one open order. A person approves every cancellation.",
        CapabilityClass::Destructive,
        move |arguments: CancelOrderArguments, _call| {
            let book = canceller.clone();
            async move { book.cancel(&arguments.order_id) }
        },
    )?
    .required_permission(CANCEL_ORDERS)
    .requires_approval()
    .timeout(CANCEL_TIMEOUT)?;
    Ok(vec![Arc::new(list_orders), Arc::new(cancel_order)])
}

/// Grants permissions by caller: a call whose tool requires a permission runs only for a caller
/// holding it. A call with no known caller, or of a tool that names no permission, is refused —
/// the service lets nothing through by omission.
#[derive(Debug, Default)]
pub struct CallerPermissions {
    granted: BTreeMap<String, BTreeSet<String>>,
}

impl CallerPermissions {
    /// Grants `permissions` to `caller`.
    pub fn grant(mut self, caller: &str, permissions: &[&str]) -> Self {
        self.granted.entry(caller.to_owned()).or_default().extend(
            permissions
                .iter()
                .map(|permission| (*permission).to_owned()),
        );
        self
    }

    fn decide(&self, question: &AuthorizationQuestion<'_>) -> AuthorizationVerdict {
        let Some(caller) = question.caller else {
            return AuthorizationVerdict::deny("the call has no caller to grant permissions to");
        };
        let Some(permission) = question.required_permission else {
            return AuthorizationVerdict::deny(format!(
                "{} requires no permission, and the order service runs only tools that name one",
                question.public_name
            ));
        };
        let holds = self
            .granted
            .get(caller)
            .is_some_and(|permissions| permissions.contains(permission));
        if holds {
            AuthorizationVerdict::Allow
        } else {
            AuthorizationVerdict::deny(format!("{caller} does not hold {permission}"))
        }
    }
}

/// The order service's grants: `support` may read and cancel orders, `viewer` only read them.
pub fn staff_permissions() -> CallerPermissions {
    CallerPermissions::default()
        .grant("support", &[READ_ORDERS, CANCEL_ORDERS])
        .grant("viewer", &[READ_ORDERS])
}

impl AuthorizationHandler for CallerPermissions {
    fn authorize<'a>(
        &'a self,
        question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>> {
        let verdict = self.decide(question);
        Box::pin(async move { Ok(verdict) })
    }
}
