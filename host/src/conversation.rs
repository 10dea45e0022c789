//! The bounded tool loop shared by model review and chat (draft §7, §8, §10; DESIGN §8): send
//! the conversation to a [`Provider`], stream its text as `text.delta`, answer its tool calls
//! through a [`ToolHost`] (which emits `tool.started` / `tool.completed`), and go round until
//! the model stops calling tools, a budget runs out, or the run is cancelled.
//!
//! Budgets ([`Budget`], spent in [`Spent`] across every conversation of a run):
//! - **tool calls** (`maxToolCalls`): a call past the budget is not run; the model is told so in
//!   the tool result and a `warning` `budget.exhausted` is emitted once. A model that keeps
//!   calling tools for [`REFUSED_TURNS`] more turns is stopped.
//! - **output tokens** (`maxOutputTokens`): each request asks for at most what is left; when
//!   nothing is left the loop stops with a `warning`.
//! - **context tokens** (`maxContextTokens`, and the provider's window): the prompt is
//!   estimated ([`estimate_tokens`]) before each request; one that cannot fit with room for
//!   [`MIN_OUTPUT_TOKENS`] of answer stops the loop with a `warning`.
//!
//! Text goes out as it comes, but at most one `text.delta` per [`TEXT_DELTA_EVERY`]: pieces that
//! arrive sooner are sent together at the end of that window (a model streams a token at a
//! time; each event is a store commit in the daemon). The first piece is never held back.
//!
//! A stream that breaks in a retryable way before the model finished its turn is retried from
//! the start of the turn (at most [`TURN_RETRIES`] times, with a `warning`
//! `provider.stream_retried` so a client can discard the turn's partial text); nothing the
//! model asked for in a broken turn has been acted on. Cancel drops the HTTP stream at once.
//!
//! The module also holds what review and chat share on the repository side of a [`ToolHost`]:
//! the read-only tools as offered to a model ([`repository_tool_specs`]), answering their calls
//! ([`call_repository_tool`]), and the `context.added` of kind `model` ([`model_context`]).

use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::error::{GatewayError, Hint, codes};
use crate::protocol::{TextDelta, Usage, Warning};
use crate::providers::{
    FinishReason, Message, ModelRequest, Part, Provider, ProviderError, Role, StreamEvent,
    ToolCall, ToolResult, ToolSpec, estimate_tokens,
};
use crate::review::Emitter;
use crate::tools::{self, Registry, SideEffect, ToolContext};

/// Turns in a row in which every tool call was refused for the budget before the loop stops.
pub const REFUSED_TURNS: u32 = 2;
/// Retries of a turn whose stream broke.
pub const TURN_RETRIES: u32 = 2;
/// The smallest answer a request may ask for; a prompt that leaves less stops the loop.
pub const MIN_OUTPUT_TOKENS: u64 = 256;

/// The limits of a run (draft §8 `policy`, capped by the config's `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Most repository tool calls (`maxToolCalls`).
    pub max_tool_calls: u32,
    /// Most model output tokens over the run (`maxOutputTokens`); `None`: only the
    /// per-request cap of the provider.
    pub max_output_tokens: Option<u64>,
    /// Most prompt + answer tokens of one request (`maxContextTokens`, at most the provider's
    /// context window).
    pub max_context_tokens: u64,
}

impl Budget {
    /// A run's budgets: the policy's values (`None`: the limit), capped by the config's
    /// `[limits]` and `provider`'s context window.
    pub fn within(
        limits: &crate::config::Limits,
        max_tool_calls: Option<u32>,
        max_output_tokens: Option<u32>,
        max_context_tokens: Option<u64>,
        provider: &dyn Provider,
    ) -> Budget {
        Budget {
            max_tool_calls: max_tool_calls
                .unwrap_or(limits.max_tool_calls_per_run)
                .min(limits.max_tool_calls_per_run),
            max_output_tokens: max_output_tokens.map(u64::from),
            max_context_tokens: max_context_tokens
                .unwrap_or(u64::MAX)
                .min(limits.max_context_tokens)
                .min(provider.context_window()),
        }
    }
}

/// What a run has used so far, summed over its requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// Tool calls run (calls refused for the budget are not counted).
    pub tool_calls: u32,
    /// Token usage as the provider reported it (estimated where it did not).
    pub usage: Usage,
    /// Whether a `budget.exhausted` warning for tool calls was emitted already.
    pub tool_budget_warned: bool,
}

/// Answers a model's tool calls.
pub trait ToolHost {
    /// The tools offered to the model.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Whether calls of `name` count against `maxToolCalls` (reporting a finding does not).
    fn counts_against_budget(&self, name: &str) -> bool;
    /// Run `call` (emitting its events through `emitter`) and answer it.
    fn call(&mut self, call: &ToolCall, emitter: &mut Emitter<'_>) -> ToolResult;
}

/// How a conversation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The model answered without calling tools.
    Done {
        /// Its text over all turns.
        text: String,
        /// Why the last turn stopped (e.g. `Length` when it hit the output cap).
        finish: FinishReason,
    },
    /// A budget ran out (a `warning` was emitted); which one, as in the policy.
    BudgetExhausted(&'static str),
    /// The run was cancelled (the stream was dropped).
    Cancelled,
}

/// One conversation: its model, prompts and tools.
#[derive(Debug, Clone)]
pub struct Conversation<'a> {
    /// The provider.
    pub provider: &'a dyn Provider,
    /// The model name.
    pub model: &'a str,
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far; the loop appends to it.
    pub messages: Vec<Message>,
}

/// Run `conversation` to its end (see the module docs).
///
/// # Errors
/// The provider's error (`provider.unavailable`, `provider.rate_limited`,
/// `provider.auth_failed`, `provider.request_rejected`, `provider.protocol_error`) once retries
/// are used up; the conversation so far stays in `conversation.messages`.
pub async fn converse(
    conversation: &mut Conversation<'_>,
    host: &mut dyn ToolHost,
    budget: &Budget,
    spent: &mut Spent,
    cancel: &CancellationToken,
    emitter: &mut Emitter<'_>,
) -> Result<End, GatewayError> {
    let tools = host.specs();
    let fixed = estimate_tokens(conversation.system) + specs_tokens(&tools);
    let mut text_all = String::new();
    let mut refused_turns = 0;
    loop {
        if cancel.is_cancelled() {
            return Ok(End::Cancelled);
        }
        // --- budgets before the request
        let left = budget
            .max_output_tokens
            .map(|max| max.saturating_sub(spent.usage.output_tokens));
        if left.is_some_and(|left| left == 0) {
            warn_budget(
                emitter,
                "maxOutputTokens",
                format!(
                    "the run used its {} output tokens; the model stops here",
                    budget.max_output_tokens.unwrap_or(0)
                ),
            );
            return Ok(End::BudgetExhausted("maxOutputTokens"));
        }
        let prompt = fixed
            + conversation
                .messages
                .iter()
                .map(message_tokens)
                .sum::<u64>();
        let room = budget.max_context_tokens.saturating_sub(prompt);
        let per_request = u64::from(conversation.provider.max_output_tokens());
        if room < MIN_OUTPUT_TOKENS.min(per_request) {
            warn_budget(
                emitter,
                "maxContextTokens",
                format!(
                    "the conversation (~{prompt} tokens) no longer fits the context of {} tokens \
                     with room for an answer; this conversation stops here",
                    budget.max_context_tokens
                ),
            );
            return Ok(End::BudgetExhausted("maxContextTokens"));
        }
        let max_output = per_request.min(left.unwrap_or(u64::MAX)).min(room);
        let request = ModelRequest {
            model: conversation.model.to_owned(),
            system: conversation.system.to_owned(),
            messages: conversation.messages.clone(),
            tools: tools.clone(),
            max_output_tokens: u32::try_from(max_output).unwrap_or(u32::MAX),
        };

        // --- one turn, retried when its stream breaks
        let turn = match turn_with_retries(conversation.provider, request, prompt, cancel, emitter)
            .await?
        {
            Some(turn) => turn,
            None => return Ok(End::Cancelled),
        };
        spent.usage.input_tokens += turn.usage.input_tokens;
        spent.usage.output_tokens += turn.usage.output_tokens;
        text_all.push_str(&turn.text);
        let mut parts = Vec::new();
        if !turn.text.is_empty() {
            parts.push(Part::Text(turn.text.clone()));
        }
        parts.extend(turn.calls.iter().cloned().map(Part::ToolCall));
        if parts.is_empty() {
            // An empty answer: nothing more will come of asking again.
            parts.push(Part::Text(String::new()));
        }
        conversation.messages.push(Message {
            role: Role::Assistant,
            parts,
        });
        if turn.calls.is_empty() {
            return Ok(End::Done {
                text: text_all,
                finish: turn.finish,
            });
        }

        // --- answer the tool calls
        let mut results = Vec::new();
        let mut refused = 0;
        let mut counted = 0;
        for call in &turn.calls {
            if cancel.is_cancelled() {
                return Ok(End::Cancelled);
            }
            if host.counts_against_budget(&call.name) {
                counted += 1;
                if spent.tool_calls >= budget.max_tool_calls {
                    refused += 1;
                    if !spent.tool_budget_warned {
                        spent.tool_budget_warned = true;
                        warn_budget(
                            emitter,
                            "maxToolCalls",
                            format!(
                                "the run made its {} tool calls; further calls are refused",
                                budget.max_tool_calls
                            ),
                        );
                    }
                    results.push(Part::ToolResult(ToolResult {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        content: format!(
                            "Not run: the review's tool-call budget ({}) is used up. Report \
                             your findings with what you have and finish.",
                            budget.max_tool_calls
                        ),
                        is_error: true,
                    }));
                    continue;
                }
                spent.tool_calls += 1;
            }
            results.push(Part::ToolResult(host.call(call, emitter)));
        }
        conversation.messages.push(Message {
            role: Role::User,
            parts: results,
        });
        if counted > 0 && refused == counted {
            refused_turns += 1;
            if refused_turns > REFUSED_TURNS {
                emitter.emit(Warning {
                    code: codes::BUDGET_EXHAUSTED.into(),
                    message: format!(
                        "the model kept calling tools after the budget of {} calls was used up; \
                         it was stopped",
                        budget.max_tool_calls
                    ),
                    path: None,
                    remediation: Some(BUDGET_REMEDIATION.to(emitter.surface()).into()),
                });
                return Ok(End::BudgetExhausted("maxToolCalls"));
            }
        } else {
            refused_turns = 0;
        }
    }
}

/// What to do when a budget runs out (model review and chat), in the words of who started the
/// run, and the config's caps.
pub const BUDGET_REMEDIATION: Hint = Hint {
    command_line: "Raise the budget with --max-tool-calls / --max-output-tokens (capped by \
         [limits] in config.toml), or review fewer files at a time (--paths).",
    request: "Raise the budget with maxToolCalls / maxOutputTokens (a review's policy, a chat's \
         maxToolCalls; capped by [limits] in the gateway's config.toml), or review fewer files at \
         a time (scope.filePaths).",
};

fn warn_budget(emitter: &mut Emitter<'_>, which: &str, message: String) {
    emitter.emit(Warning {
        code: codes::BUDGET_EXHAUSTED.into(),
        message: format!("{which}: {message}"),
        path: None,
        remediation: Some(BUDGET_REMEDIATION.to(emitter.surface()).into()),
    });
}

/// Estimated tokens of tool definitions in a request.
pub fn specs_tokens(specs: &[ToolSpec]) -> u64 {
    specs
        .iter()
        .map(|t| {
            estimate_tokens(&t.name)
                + estimate_tokens(&t.description)
                + estimate_tokens(&t.input_schema.to_string())
        })
        .sum()
}

fn message_tokens(message: &Message) -> u64 {
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text(text) => estimate_tokens(text),
            Part::ToolCall(call) => estimate_tokens(&call.name) + estimate_tokens(&call.arguments),
            Part::ToolResult(result) => estimate_tokens(&result.content),
        } + 4)
        .sum()
}

/// The shortest time between two `text.delta`s of a turn; pieces in between are sent together.
pub const TEXT_DELTA_EVERY: Duration = Duration::from_millis(50);

fn emit_text(emitter: &mut Emitter<'_>, pending: &mut String) {
    if !pending.is_empty() {
        emitter.emit(TextDelta {
            text: std::mem::take(pending),
        });
    }
}

/// A completed turn.
struct Turn {
    text: String,
    calls: Vec<ToolCall>,
    usage: Usage,
    finish: FinishReason,
}

/// One turn, redone from its start when its stream breaks in a retryable way. `None` when
/// cancelled.
async fn turn_with_retries(
    provider: &dyn Provider,
    request: ModelRequest,
    prompt_estimate: u64,
    cancel: &CancellationToken,
    emitter: &mut Emitter<'_>,
) -> Result<Option<Turn>, GatewayError> {
    let mut attempt = 0;
    loop {
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(None),
            result = turn(provider, request.clone(), prompt_estimate, cancel, emitter) => result,
        };
        match result {
            Ok(Some(turn)) => return Ok(Some(turn)),
            Ok(None) => return Ok(None),
            Err(TurnError { error, streamed }) => {
                if !(error.is_transient() && streamed) || attempt >= TURN_RETRIES {
                    return Err(error.for_provider(provider.id()));
                }
                attempt += 1;
                emitter.emit(Warning {
                    code: "provider.stream_retried".into(),
                    message: format!(
                        "{error}; the model's turn is asked again (attempt {} of {}), so text \
                         streamed since its start is repeated",
                        attempt + 1,
                        TURN_RETRIES + 1
                    ),
                    path: None,
                    remediation: None,
                });
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
        }
    }
}

/// A failed turn: the error, and whether a stream had started (a failure before it was already
/// retried by the client).
struct TurnError {
    error: ProviderError,
    streamed: bool,
}

async fn turn(
    provider: &dyn Provider,
    request: ModelRequest,
    prompt_estimate: u64,
    cancel: &CancellationToken,
    emitter: &mut Emitter<'_>,
) -> Result<Option<Turn>, TurnError> {
    let mut stream = provider.stream(request).await.map_err(|error| TurnError {
        error,
        streamed: false,
    })?;
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut usage = None;
    // Text not yet emitted, and when a `text.delta` was last emitted: a piece goes out at once
    // when none went out in the last [`TEXT_DELTA_EVERY`], else it waits for the end of that
    // window together with the pieces after it (each event is a store commit in the daemon).
    let mut pending = String::new();
    let mut last_emit: Option<tokio::time::Instant> = None;
    loop {
        let deadline = last_emit.map_or_else(tokio::time::Instant::now, |at| at + TEXT_DELTA_EVERY);
        let item = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(None),
            () = tokio::time::sleep_until(deadline), if !pending.is_empty() => {
                emit_text(emitter, &mut pending);
                last_emit = Some(tokio::time::Instant::now());
                continue;
            }
            item = stream.next() => item,
        };
        if !matches!(item, Some(Ok(StreamEvent::TextDelta(_)))) {
            emit_text(emitter, &mut pending);
        }
        match item {
            Some(Ok(StreamEvent::TextDelta(piece))) => {
                text.push_str(&piece);
                pending.push_str(&piece);
                let now = tokio::time::Instant::now();
                if last_emit.is_none_or(|at| now >= at + TEXT_DELTA_EVERY) {
                    emit_text(emitter, &mut pending);
                    last_emit = Some(now);
                }
            }
            Some(Ok(StreamEvent::ToolCall(call))) => calls.push(call),
            Some(Ok(StreamEvent::Usage(u))) => usage = Some(u),
            Some(Ok(StreamEvent::Finished(finish))) => {
                let usage = usage.unwrap_or_else(|| Usage {
                    input_tokens: prompt_estimate,
                    output_tokens: estimate_tokens(&text)
                        + calls
                            .iter()
                            .map(|c: &ToolCall| estimate_tokens(&c.arguments))
                            .sum::<u64>(),
                });
                return Ok(Some(Turn {
                    text,
                    calls,
                    usage,
                    finish,
                }));
            }
            Some(Err(error)) => {
                return Err(TurnError {
                    error,
                    streamed: true,
                });
            }
            None => {
                return Err(TurnError {
                    error: ProviderError::Interrupted {
                        url: provider.id().to_owned(),
                        detail: "the stream ended without a finish".into(),
                    },
                    streamed: true,
                });
            }
        }
    }
}

// === The repository side of a tool host (model review and chat) ===

/// Most characters of a tool answer sent back to the model (the rest is cut with a note).
pub const TOOL_RESULT_CHARS: usize = 12_000;

/// What to do when the context window is too small (model review and chat).
pub const CONTEXT_REMEDIATION: Hint = Hint {
    command_line: "Raise the provider's context_window in config.toml (and the model server's \
         own, e.g. Ollama's num_ctx or llama-server -c), or review fewer files at a time with \
         --paths.",
    request: "Raise the provider's context_window in the gateway's config.toml (and the model \
         server's own, e.g. Ollama's num_ctx or llama-server -c), or review fewer files at a \
         time (scope.filePaths).",
};

/// The `context.added` of kind `model` for a run of `model` on `provider` within `budget`.
pub fn model_context(
    provider: &dyn Provider,
    model: &str,
    budget: &Budget,
    tools: bool,
) -> crate::protocol::ContextAdded {
    crate::protocol::ContextAdded {
        context: crate::protocol::ContextItem::Model(crate::protocol::ModelContext {
            provider_id: provider.id().to_owned(),
            provider_kind: provider.kind().as_str().to_owned(),
            model: model.to_owned(),
            max_context_tokens: budget.max_context_tokens,
            max_tool_calls: budget.max_tool_calls,
            max_output_tokens: budget.max_output_tokens,
            tools,
        }),
    }
}

/// The read-only tools of `registry` as offered to a model (`run_check` never), their schemas
/// without the `$schema` and `title` keys a model does not need.
pub fn repository_tool_specs(registry: &Registry) -> Vec<ToolSpec> {
    registry
        .tools()
        .filter(|t| t.side_effect() != SideEffect::Command)
        .map(|t| {
            let mut schema = t.input_schema();
            if let Some(object) = schema.as_object_mut() {
                object.remove("$schema");
                object.remove("title");
            }
            ToolSpec {
                name: t.name().into(),
                description: t.description().into(),
                input_schema: schema,
            }
        })
        .collect()
}

/// Answer a model's call of a read-only repository tool in `ctx` (`None`: no tools offered),
/// emitting `tool.started` and `tool.completed` (redacted, draft §10); the model gets the
/// whole answer cut to [`TOOL_RESULT_CHARS`], or the error with its remediation.
pub fn call_repository_tool(
    ctx: Option<&ToolContext>,
    registry: &Registry,
    call: &ToolCall,
    emitter: &mut Emitter<'_>,
) -> ToolResult {
    let answer = |content: String, is_error: bool| ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error,
    };
    let tool = match (ctx, registry.get(&call.name)) {
        (Some(ctx), Ok(tool)) if tool.side_effect() != SideEffect::Command => (ctx, tool),
        _ => return answer(format!("There is no tool `{}` here.", call.name), true),
    };
    let arguments = match call.parsed_arguments() {
        Ok(arguments) => arguments,
        Err(why) => return answer(format!("Not run: {why}. Send a JSON object."), true),
    };
    let (ctx, tool) = tool;
    let invocation = tools::invoke(tool, ctx, &call.id, arguments);
    emitter.emit(invocation.started);
    emitter.emit(invocation.completed);
    match invocation.result {
        Ok(output) => answer(cut(&output.value.to_string(), TOOL_RESULT_CHARS), false),
        Err(error) => answer(
            format!("{}: {} ({})", error.code, error.message, error.remediation),
            true,
        ),
    }
}

/// `text` cut to at most `max` characters, with a note when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!(
            "{}…[cut: the answer was longer than {max} characters]",
            &text[..end]
        ),
    }
}
