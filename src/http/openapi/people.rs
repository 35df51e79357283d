//! People in the document: who a token is, a `/web` link exchanged for a session, personal
//! tokens, and one's own web conversation.

use serde_json::{Value, json};

use super::{Schemas, body_errors, error, json_body, merge, misdirected, operation, path_param, with_body};
use crate::http::chat::{Lines, LinesQuery, Said, Say};
use crate::http::people::{LinkCheck, LinkFor, Me, NewToken, SignIn, SignedIn, TokenList, TokenMade};

/// A person acting faster than `[limits]` lets them (429), with when to try again.
pub(super) fn limited() -> Value {
    let mut limited = error(
        "A person's own token acting faster than `[limits] per_person` lets one person (`rate_limited`); nothing was \
         done. `Retry-After` says in how many seconds to try again.",
    );
    limited["headers"] =
        json!({"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer", "minimum": 1}}});
    limited
}

pub(super) fn paths(s: &mut Schemas) -> Value {
    let me = operation(
        "getMe",
        "Who this token is",
        "people",
        json!({}),
        json!({"200": json_body("The token's person and what it may do.", s.written::<Me>())}),
    );
    let mut sign_in = json!({
        "operationId": "signIn",
        "summary": "Exchange a /web link for a browser session",
        "description": "The link a chat's `/web` sends carries `#signin=<secret>`; it works once, within minutes. \
                        Send `as` (whom `POST /api/signin/check` said the link signs in) once the person agreed.",
        "tags": ["people"],
        "security": [],
        "requestBody": {"required": true, "content": {"application/json": {"schema": s.read::<SignIn>()}}},
    });
    let mut responses = json!({
        "200": json_body("Signed in: the session's token.", s.written::<SignedIn>()),
        "400": error("The body is not a link's secret."),
        "401": error("The link was used, has expired, or is not one (`link_not_valid`)."),
        "409": error("The link signs in as someone else than `as` (`not_this_person`); it was not used."),
        "500": error("The store failed; nothing was changed."),
    });
    merge(&mut responses, body_errors());
    merge(&mut responses, misdirected());
    sign_in["responses"] = responses;
    let mut check = json!({
        "operationId": "checkSignInLink",
        "summary": "Whom a /web link signs in, without using it",
        "description": "What a page shows before it asks the person whether to sign in: a link someone else sent \
                        would sign the browser in as them.",
        "tags": ["people"],
        "security": [],
        "requestBody": {"required": true, "content": {"application/json": {"schema": s.read::<LinkCheck>()}}},
    });
    let mut responses = json!({
        "200": json_body("Whom the link signs in, and until when it may be used.", s.written::<LinkFor>()),
        "400": error("The body is not a link's secret."),
        "401": error("The link was used, has expired, or is not one (`link_not_valid`)."),
        "500": error("The store failed."),
    });
    merge(&mut responses, body_errors());
    merge(&mut responses, misdirected());
    check["responses"] = responses;
    let list = operation(
        "listTokens",
        "List personal tokens, sessions and unused links",
        "people",
        json!({}),
        json!({"200": json_body("By name; never their secrets.", s.written::<TokenList>())}),
    );
    let add = with_body(
        "addToken",
        "Make a personal token (or an agent's)",
        "people",
        s.read::<NewToken>(),
        json!({
            "201": json_body("Made: its secret, shown this once.", s.written::<TokenMade>()),
            "409": error("A token has this name (`token_exists`)."),
        }),
    );
    let mut revoke = operation(
        "revokeToken",
        "Revoke a personal token or a session",
        "people",
        json!({}),
        json!({
            "204": {"description": "Revoked: refused from now on; what it holds open (event streams, long-polls, \
                                     MCP sessions) ends at once."},
            "404": error("No token has this name."),
        }),
    );
    revoke["parameters"] = json!([path_param("name", "The token's name, as listed.")]);
    let say = with_body(
        "say",
        "Say something in one's own conversation",
        "people",
        s.read::<Say>(),
        json!({
            "200": json_body("What askgate made of it; its reply is also a line.", s.written::<Said>()),
            "404": error("Web conversations are not served here."),
            "429": limited(),
        }),
    );
    let mut lines = operation(
        "readLines",
        "Read one's own conversation",
        "people",
        json!({}),
        json!({
            "200": json_body("The lines after `after`, oldest first.", s.written::<Lines>()),
            "400": error("A malformed query, or `wait` over 30."),
            "404": error("Web conversations are not served here."),
        }),
    );
    lines["parameters"] = Value::Array(s.query::<LinesQuery>());
    json!({
        "/api/me": {"get": me},
        "/api/messages": {"get": lines, "post": say},
        "/api/signin": {"post": sign_in},
        "/api/signin/check": {"post": check},
        "/api/tokens": {"get": list, "post": add},
        "/api/tokens/{name}": {"delete": revoke},
    })
}
