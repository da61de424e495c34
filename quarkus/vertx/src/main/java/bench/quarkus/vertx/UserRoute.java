package bench.quarkus.vertx;

import jakarta.inject.Singleton;

import io.quarkus.vertx.web.Route;
import io.quarkus.vertx.web.Route.HttpMethod;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
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

    private final BearerTokens tokens;
    private final PreparedQuery<RowSet<Row>> lookup;

    UserRoute(BearerTokens tokens, Pool pool) {
        this.tokens = tokens;
        this.lookup = pool.preparedQuery(SELECT);
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
