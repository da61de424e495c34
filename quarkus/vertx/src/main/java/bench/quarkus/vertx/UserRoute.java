package bench.quarkus.vertx;

import java.util.ArrayList;

import jakarta.inject.Singleton;

import io.quarkus.vertx.web.Route;
import io.quarkus.vertx.web.Route.HttpMethod;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.RoutingContext;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.PreparedQuery;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowIterator;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.Tuple;

/**
 * GET / on the Vert.x event loop, no ORM: the token is checked by {@link BearerTokens}, then the reactive
 * MySQL client runs the prepared SELECT (cached per connection) {@code queries} times, one after the other
 * (composed futures, never in parallel), and the row goes out as JSON.
 */
@Singleton
public class UserRoute {

    static final String SELECT = "SELECT email, first, last, city, county, age FROM users WHERE email = ?";

    private static final String JSON = "application/json";
    private static final Buffer NOT_FOUND = Buffer.buffer("{\"error\":\"not_found\"}");
    private static final Buffer INVALID_TOKEN = Buffer.buffer("{\"error\":\"invalid_token\"}");
    private static final Buffer INVALID_QUERIES = Buffer.buffer("{\"error\":\"invalid_queries\"}");

    private static final Buffer INVALID_CALLS = Buffer.buffer("{\"error\":\"invalid_calls\"}");
    private static final Buffer INVALID_MODE = Buffer.buffer("{\"error\":\"invalid_mode\"}");
    private static final Buffer DOWNSTREAM = Buffer.buffer("{\"error\":\"downstream\"}");

    private final BearerTokens tokens;
    private final PreparedQuery<RowSet<Row>> lookup;
    private final Downstream downstream;

    UserRoute(BearerTokens tokens, Pool pool, Downstream downstream) {
        this.tokens = tokens;
        this.lookup = pool.preparedQuery(SELECT);
        this.downstream = downstream;
    }

    /**
     * GET /feed: the token's user and K downstream items ({@code ?calls=K}, 1..10, default 3), all K requests
     * sent at once ({@code ?mode=sequential}: one after another). 401, then 400, then the one lookup (404: no
     * downstream call), then the calls: any failure or timeout is 502.
     */
    @Route(path = "/feed", methods = HttpMethod.GET)
    void feed(RoutingContext rc) {
        tokens.email(rc.request().getHeader(HttpHeaders.AUTHORIZATION)).onComplete(email -> {
            if (email.failed()) {
                rc.response().putHeader("WWW-Authenticate", "Bearer error=\"invalid_token\"");
                json(rc.response(), 401, INVALID_TOKEN);
                return;
            }
            int calls = Queries.calls(rc.request());
            if (calls == Queries.INVALID) {
                json(rc.response(), 400, INVALID_CALLS);
                return;
            }
            int mode = Queries.mode(rc.request());
            if (mode == Queries.INVALID) {
                json(rc.response(), 400, INVALID_MODE);
                return;
            }
            lookup.execute(Tuple.of(email.result())).onComplete(rows -> {
                if (rows.failed()) {
                    rc.fail(rows.cause());
                    return;
                }
                RowIterator<Row> it = rows.result().iterator();
                if (!it.hasNext()) {
                    json(rc.response(), 404, NOT_FOUND);
                    return;
                }
                JsonObject user = it.next().toJson();
                downstream.items(user.getString("email"), calls, mode == Queries.SEQUENTIAL).onComplete(items -> {
                    if (items.failed()) {
                        json(rc.response(), 502, DOWNSTREAM);
                        return;
                    }
                    json(rc.response(), 200, new JsonObject().put("user", user)
                            .put("items", new JsonArray(new ArrayList<>(items.result()))).toBuffer());
                });
            });
        });
    }

    @Route(path = "/", methods = HttpMethod.GET)
    void user(RoutingContext rc) {
        tokens.email(rc.request().getHeader(HttpHeaders.AUTHORIZATION)).onComplete(email -> {
            if (email.failed()) {
                rc.response().putHeader("WWW-Authenticate", "Bearer error=\"invalid_token\"");
                json(rc.response(), 401, INVALID_TOKEN);
                return;
            }
            // the token first: a bad token is a 401 whatever queries says
            int n = Queries.of(rc.request());
            if (n == Queries.INVALID) {
                json(rc.response(), 400, INVALID_QUERIES);
                return;
            }
            Tuple key = Tuple.of(email.result());
            Future<RowSet<Row>> lookups = lookup.execute(key);
            for (int i = 1; i < n; i++) {
                lookups = lookups.compose(previous -> lookup.execute(key));
            }
            lookups.onComplete(rows -> {
                if (rows.failed()) {
                    rc.fail(rows.cause());
                    return;
                }
                RowIterator<Row> it = rows.result().iterator();
                if (it.hasNext()) {
                    // columns in SELECT order: email, first, last, city, county, age (a number)
                    json(rc.response(), 200, it.next().toJson().toBuffer());
                } else {
                    json(rc.response(), 404, NOT_FOUND);
                }
            });
        });
    }

    private static void json(HttpServerResponse response, int status, Buffer body) {
        response.setStatusCode(status).putHeader(HttpHeaders.CONTENT_TYPE, JSON).end(body);
    }
}
