package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.dma.api.Operands;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeFabric;
import dev.dma.libfabric.LibfabricEndpoint;
import dev.dma.provider.efa.EfaProvider;
import dev.dma.provider.tcp.TcpProvider;
import java.io.IOException;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReader;
import java.lang.module.ModuleReference;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.RecordComponent;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.jspecify.annotations.NullMarked;
import org.junit.jupiter.api.Test;

/**
 * The conventions of the public API, over every package a dma module exports (read from the
 * modules' own descriptors, so a new exported package is covered without editing this test): each
 * is {@code @NullMarked}, so an unannotated reference is non-null and NullAway checks it in the
 * build; and no public or protected member uses {@code java.util.Optional}, since absent references
 * are {@code @Nullable} throughout.
 */
class ApiConventionsTest {
  private static final List<Class<?>> ONE_CLASS_PER_MODULE =
      List.of(
          Operands.class,
          FabricService.class,
          LibfabricEndpoint.class,
          TcpProvider.class,
          EfaProvider.class,
          FakeFabric.class);

  @Test
  void everyExportedPackageIsNullMarked() throws Exception {
    List<String> unmarked = new ArrayList<>();
    for (ModuleReference module : modules()) {
      for (ModuleDescriptor.Exports exports : module.descriptor().exports()) {
        Class<?> info = Class.forName(exports.source() + ".package-info");
        if (!info.isAnnotationPresent(NullMarked.class)) {
          unmarked.add(exports.source());
        }
      }
    }
    assertEquals(List.of(), unmarked, "exported packages without @NullMarked");
  }

  @Test
  void noPublicMemberUsesOptional() throws Exception {
    TreeSet<String> offenders = new TreeSet<>();
    int types = 0;
    for (ModuleReference module : modules()) {
      for (Class<?> type : exportedTypes(module)) {
        types++;
        for (Method method : type.getDeclaredMethods()) {
          if (!visible(method.getModifiers()) || method.isSynthetic()) {
            continue;
          }
          if (Optional.class.equals(method.getReturnType())) {
            offenders.add(type.getName() + "." + method.getName() + "() returns Optional");
          }
          for (Class<?> parameter : method.getParameterTypes()) {
            if (Optional.class.equals(parameter)) {
              offenders.add(type.getName() + "." + method.getName() + " takes an Optional");
            }
          }
        }
        if (type.isRecord()) {
          for (RecordComponent component : type.getRecordComponents()) {
            if (Optional.class.equals(component.getType())) {
              offenders.add(type.getName() + "." + component.getName() + " is an Optional");
            }
          }
        }
      }
    }
    assertFalse(types < 40, "found only " + types + " exported types: the scan is broken");
    assertEquals(new TreeSet<String>(), offenders);
  }

  private static boolean visible(int modifiers) {
    return Modifier.isPublic(modifiers) || Modifier.isProtected(modifiers);
  }

  private static List<ModuleReference> modules() throws URISyntaxException {
    List<ModuleReference> modules = new ArrayList<>();
    for (Class<?> type : ONE_CLASS_PER_MODULE) {
      Path location = Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI());
      modules.addAll(ModuleFinder.of(location).findAll());
    }
    assertEquals(ONE_CLASS_PER_MODULE.size(), modules.size(), "one module per location");
    return modules;
  }

  /** The public and protected types, nested ones included, of the module's exported packages. */
  private static List<Class<?>> exportedTypes(ModuleReference module) throws Exception {
    List<String> exported =
        module.descriptor().exports().stream()
            .map(e -> e.source().replace('.', '/') + "/")
            .toList();
    List<Class<?>> types = new ArrayList<>();
    try (ModuleReader reader = module.open();
        Stream<String> names = reader.list()) {
      for (String name : names.toList()) {
        if (!name.endsWith(".class") || name.endsWith("package-info.class")) {
          continue;
        }
        String dir = name.substring(0, name.lastIndexOf('/') + 1);
        if (!exported.contains(dir)) {
          continue;
        }
        Class<?> type = load(name);
        if (visible(type.getModifiers()) && !type.isAnonymousClass() && !type.isSynthetic()) {
          types.add(type);
        }
      }
    } catch (IOException e) {
      throw new AssertionError("cannot list " + module.descriptor().name(), e);
    }
    return types;
  }

  private static Class<?> load(String resource) throws ClassNotFoundException {
    String name = resource.substring(0, resource.length() - ".class".length()).replace('/', '.');
    return Class.forName(name, false, ApiConventionsTest.class.getClassLoader());
  }
}
