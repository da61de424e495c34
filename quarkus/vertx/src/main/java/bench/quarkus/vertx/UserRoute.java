package bench.quarkus.vertx;

import jakarta.inject.Singleton;

import io.quarkus.vertx.web.Route;
import io.quarkus.vertx.web.Route.HttpMethod;
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
 * GET / on the Vert.x event loop, no ORM: the token is checked by {@link BearerTokens}, the
 * reactive MySQL client runs one prepared SELECT (cached per connection), the row goes out as JSON.
 */
@Singleton
public class UserRoute {

    static final String SELECT = "SELECT email, first, last, city, county, age FROM users WHERE email = ?";

    private static final String JSON = "application/json";
    private static final Buffer NOT_FOUND = Buffer.buffer("{\"error\":\"not_found\"}");
    private static final Buffer INVALID_TOKEN = Buffer.buffer("{\"error\":\"invalid_token\"}");

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
            lookup.execute(Tuple.of(email.result())).onComplete(rows -> {
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
