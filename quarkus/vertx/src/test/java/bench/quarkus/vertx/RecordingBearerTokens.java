package bench.quarkus.vertx;

import jakarta.annotation.Priority;
import jakarta.enterprise.inject.Alternative;
import jakarta.inject.Singleton;

import org.eclipse.microprofile.config.inject.ConfigProperty;

import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;

/**
 * Test-only (src/test) stand-in for {@link BearerTokens} that does the same verification and
 * records, per Authorization header, the thread the route handler called it on.
 */
@Alternative
@Priority(1)
@Singleton
public class RecordingBearerTokens extends BearerTokens {

    record Seen(String thread, boolean eventLoop) {
    }

    static final java.util.Map<String, Seen> CALLS = new java.util.concurrent.ConcurrentHashMap<>();

    RecordingBearerTokens(Vertx vertx, @ConfigProperty(name = "bench.jwt.secret") String secret) {
        super(vertx, secret);
    }

    @Override
    public Future<String> email(String authorization) {
        if (authorization != null) {
            CALLS.put(authorization, new Seen(Thread.currentThread().getName(), Context.isOnEventLoopThread()));
        }
        return super.email(authorization);
    }
}
