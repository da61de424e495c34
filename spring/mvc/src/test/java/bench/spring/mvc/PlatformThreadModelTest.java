package bench.spring.mvc;

import org.junit.jupiter.api.Test;

import org.springframework.test.context.ActiveProfiles;

import static org.assertj.core.api.Assertions.assertThat;

/** With the {@code platform} profile (spring-platform), requests run on Tomcat's platform worker threads. */
@ActiveProfiles("platform")
class PlatformThreadModelTest extends ThreadModelTest {

    @Test
    void requestRunsOnAPlatformTomcatWorker() throws Exception {
        Thread thread = handlingThread();

        assertThat(thread.isVirtual()).as("%s is virtual", thread).isFalse();
        assertThat(thread.getName()).startsWith("http-nio-").contains("-exec-");
    }
}
