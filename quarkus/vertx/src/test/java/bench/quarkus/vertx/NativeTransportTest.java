package bench.quarkus.vertx;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.inject.Inject;

import org.junit.jupiter.api.Test;

import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.quarkus.test.junit.QuarkusTest;
import io.vertx.core.Vertx;

/**
 * quarkus.vertx.prefer-native-transport=true with netty-transport-native-epoll: Vert.x (HTTP server and
 * clients) runs on epoll event loops, not NIO. The setting falls back to NIO silently when the native
 * library cannot load, so this checks the transport actually in use.
 */
@QuarkusTest
class NativeTransportTest {

    @Inject
    Vertx vertx;

    @Test
    void vertxRunsOnEpoll() {
        assertTrue(Epoll.isAvailable(), () -> "epoll unavailable: " + Epoll.unavailabilityCause());
        assertTrue(vertx.isNativeTransportEnabled(), "Vert.x fell back to NIO");
        assertInstanceOf(EpollEventLoopGroup.class, vertx.nettyEventLoopGroup());
    }
}
