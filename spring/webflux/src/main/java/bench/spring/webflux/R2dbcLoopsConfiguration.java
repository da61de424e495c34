package bench.spring.webflux;

import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Option;
import reactor.netty.resources.LoopResources;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.r2dbc.autoconfigure.ConnectionFactoryOptionsBuilderCustomizer;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.client.ReactorResourceFactory;

/**
 * Runs r2dbc-mysql's connections on the HTTP server's event loops instead of a second group.
 * <p>
 * By default r2dbc-mysql connects with Reactor Netty's global TCP resources ({@code TcpResources.get()},
 * threads {@code reactor-tcp-epoll-*}), a group separate from the HTTP server's ({@code reactor-http-epoll-*}):
 * on 2 cores that is 8 event-loop threads, and every lookup crosses from one group to the other and back.
 * r2dbc-mysql's documented {@code loopResources} option (MySqlConnectionFactoryProvider.LOOP_RESOURCES,
 * since 1.1.2) takes the LoopResources to use; this passes the ones Spring Boot gives the Netty server
 * ({@link ReactorResourceFactory}), so one group of event loops serves both, as Reactor Netty's reference
 * describes its default ("This Event Loop Group is shared between all servers and clients in one JVM").
 * <p>
 * {@code R2DBC_SHARE_HTTP_LOOPS=false} turns it off (the driver's default resources).
 * <p>
 * Shutdown order: the ReactorResourceFactory (lifecycle phase 0) disposes its loops, and with them every
 * channel on them, before the pool bean is destroyed, so the pool would find its connections already cut
 * ("Connection unexpectedly closed", no COM_QUIT). {@link #closePoolBeforeTheLoops} closes the pool in
 * phase 1: after the web server has stopped (its phases are higher), before the loops go.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnBooleanProperty(name = "bench.r2dbc.share-http-loops", matchIfMissing = true)
class R2dbcLoopsConfiguration {

    static final Option<LoopResources> LOOP_RESOURCES = Option.valueOf("loopResources");

    @Bean
    ConnectionFactoryOptionsBuilderCustomizer shareHttpServerLoops(ObjectProvider<ReactorResourceFactory> resourceFactory) {
        return options -> {
            ReactorResourceFactory factory = resourceFactory.getIfAvailable();
            if (factory != null) {
                options.option(LOOP_RESOURCES, factory.getLoopResources());
            }
        };
    }

    @Bean
    SmartLifecycle closePoolBeforeTheLoops(ObjectProvider<ConnectionFactory> connectionFactory) {
        return new SmartLifecycle() {

            private volatile boolean running;

            @Override
            public void start() {
                running = true;
            }

            @Override
            public void stop() {
                running = false;
                if (connectionFactory.getIfAvailable() instanceof ConnectionPool pool) {
                    pool.dispose();
                }
            }

            @Override
            public boolean isRunning() {
                return running;
            }

            @Override
            public int getPhase() {
                return 1;
            }

            @Override
            public boolean isPauseable() {
                // Not stopped when a cached test context is paused (as the ReactorResourceFactory is not):
                // a disposed pool does not come back on restart.
                return false;
            }
        };
    }
}
