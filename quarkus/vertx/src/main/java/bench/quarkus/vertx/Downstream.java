package bench.quarkus.vertx;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import jakarta.inject.Singleton;

import org.eclipse.microprofile.config.inject.ConfigProperty;

import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.client.WebClient;
import io.vertx.ext.web.client.WebClientOptions;

/**
 * GET /feed's downstream calls with the Vert.x {@link WebClient}: K requests sent at once and joined with
 * {@code Future.all} (which fails as soon as one fails; Vert.x futures cannot be cancelled, so the others run
 * to their end or their timeout), or composed one after another. Each call is bounded by
 * {@code HttpRequest.timeout}. The connection pool is the client's default
 * ({@code HttpClientOptions.DEFAULT_MAX_POOL_SIZE}: 5 HTTP/1.1 connections per host, unbounded wait queue)
 * unless {@code bench.downstream.pool-size} (BENCH_DOWNSTREAM_POOL_SIZE) sets it.
 */
@Singleton
public class Downstream {

    private final WebClient client;
    private final long timeoutMs;

    Downstream(Vertx vertx, @ConfigProperty(name = "bench.downstream.url") String url,
               @ConfigProperty(name = "bench.downstream.timeout-ms") long timeoutMs,
               @ConfigProperty(name = "bench.downstream.pool-size") Optional<Integer> poolSize) {
        URI uri = URI.create(url);
        WebClientOptions options = new WebClientOptions()
                .setDefaultHost(uri.getHost())
                .setDefaultPort(uri.getPort() < 0 ? 80 : uri.getPort())
                .setConnectTimeout((int) timeoutMs);
        poolSize.ifPresent(options::setMaxPoolSize);
        this.client = WebClient.create(vertx, options);
        this.timeoutMs = timeoutMs;
    }

    /** One call: the answer as {@code {"email":..,"i":..}} (parsed, then rebuilt in that order). */
    Future<JsonObject> item(String email, int i) {
        return client.get("/item")
                .addQueryParam("email", email)
                .addQueryParam("i", Integer.toString(i))
                .timeout(timeoutMs)
                .send()
                .map(response -> {
                    if (response.statusCode() != 200) {
                        throw new IllegalStateException("downstream status " + response.statusCode());
                    }
                    JsonObject body = response.bodyAsJsonObject();
                    return new JsonObject().put("email", body.getString("email")).put("i", body.getInteger("i"));
                });
    }

    Future<List<JsonObject>> items(String email, int calls, boolean sequential) {
        if (sequential) {
            List<JsonObject> items = new ArrayList<>(calls);
            Future<Void> chain = Future.succeededFuture();
            for (int i = 0; i < calls; i++) {
                int index = i;
                chain = chain.compose(v -> item(email, index)).map(item -> {
                    items.add(item);
                    return null;
                });
            }
            return chain.map(v -> items);
        }
        List<Future<JsonObject>> futures = new ArrayList<>(calls);
        for (int i = 0; i < calls; i++) {
            futures.add(item(email, i));
        }
        return Future.all(futures).map(all -> all.<JsonObject> list());
    }
}
