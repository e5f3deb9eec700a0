package io.lockagent;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.Comparator;
import java.util.regex.Pattern;

/**
 * Runs the @Test methods of the classes named on the command line, each on a new instance, and
 * exits 1 if any failed. -Dtest=REGEX runs only the methods whose Class.method matches. The
 * client's tests need the JDK alone, so no JUnit.
 */
public final class TestRunner {
    public static void main(String[] args) throws Exception {
        Pattern only = Pattern.compile(System.getProperty("test", ".*"));
        int passed = 0;
        int failed = 0;
        long start = System.nanoTime();
        try {
            for (String className : args) {
                Class<?> c = Class.forName(className);
                Method[] methods = c.getDeclaredMethods();
                Arrays.sort(methods, Comparator.comparing(Method::getName));
                for (Method m : methods) {
                    String id = c.getSimpleName() + "." + m.getName();
                    if (!m.isAnnotationPresent(Test.class) || !only.matcher(id).find()) {
                        continue;
                    }
                    if (run(c, m, id)) {
                        passed++;
                    } else {
                        failed++;
                    }
                }
            }
        } finally {
            Agents.stopAll();
        }
        System.out.printf("%d passed, %d failed in %.1fs%n", passed, failed, (System.nanoTime() - start) / 1e9);
        System.exit(failed == 0 && passed > 0 ? 0 : 1);
    }

    private static boolean run(Class<?> c, Method m, String id) throws ReflectiveOperationException {
        long start = System.nanoTime();
        try {
            m.invoke(c.getDeclaredConstructor().newInstance());
            System.out.printf("ok   %s (%.2fs)%n", id, (System.nanoTime() - start) / 1e9);
            return true;
        } catch (InvocationTargetException e) {
            System.out.printf("FAIL %s (%.2fs)%n", id, (System.nanoTime() - start) / 1e9);
            e.getCause().printStackTrace(System.out);
            return false;
        }
    }
}
