package bench.quarkus.reactive;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import jakarta.ws.rs.container.ContainerRequestContext;

import org.jboss.resteasy.reactive.server.ServerRequestFilter;

import io.vertx.core.Context;

/**
 * Test-only (src/test) request filter. Quarkus REST runs a (default, not nonBlocking) request
 * filter on the thread that then invokes the resource method, so this records, per request tagged
 * with an X-Probe header, where the endpoint ran.
 */
public class ThreadProbe {

    record Seen(String thread, boolean eventLoop) {
    }

    static final Map<String, Seen> REQUESTS = new ConcurrentHashMap<>();

    @ServerRequestFilter
    public void record(ContainerRequestContext request) {
        String id = request.getHeaderString("X-Probe");
        if (id != null) {
            REQUESTS.put(id, new Seen(Thread.currentThread().getName(), Context.isOnEventLoopThread()));
        }
    }
}
