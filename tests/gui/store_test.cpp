// ConversationStore: schema and migrations, transactions, search, export, and crash safety (a
// writer killed with SIGKILL loses at most the message it was generating).
#include <gtest/gtest.h>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>

#include "conversation/conversationstore.h"

namespace neural::gui {
namespace {

// Runs SQL statements on `path` through a connection of its own (to build old / odd files).
void rawSql(const QString& path, const QStringList& statements) {
    {
        QSqlDatabase db =
            QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        ASSERT_TRUE(db.open());
        QSqlQuery q(db);
        for (const QString& s : statements) ASSERT_TRUE(q.exec(s)) << s.toStdString();
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
}

int rawInt(const QString& path, const QString& sql) {
    int v = -1;
    {
        QSqlDatabase db =
            QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        if (db.open()) {
            QSqlQuery q(db);
            if (q.exec(sql) && q.next()) v = q.value(0).toInt();
            db.close();
        }
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
    return v;
}

TEST(ConversationStore, CreatesTheSchemaAndRoundTripsMessages) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    {
        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        EXPECT_EQ(s.schemaVersion(), ConversationStore::kSchemaVersion);
        const qint64 a = s.createConversation(QStringLiteral("Alpha"));
        const qint64 b = s.createConversation(QStringLiteral("Beta"));
        ASSERT_GT(a, 0);
        ASSERT_GT(b, a);
        EXPECT_GT(s.appendMessage(a, QStringLiteral("user"), QStringLiteral("hi there")).id, 0)
            << s.lastError().toStdString();
        const QJsonObject stats{{QStringLiteral("tokens"), 7}};
        const auto reply =
            s.appendMessage(a, QStringLiteral("assistant"), QStringLiteral("**hello**"),
                            QStringLiteral("thinking"), stats);
        EXPECT_EQ(reply.position, 1);
        EXPECT_GT(s.appendMessage(b, QStringLiteral("user"), QStringLiteral("zebra facts")).id, 0);
        ASSERT_TRUE(
            s.setConversationSettings(a, QStringLiteral("Be brief."), QStringLiteral("high")));
    }
    ConversationStore s;  // reopened: everything was committed
    ASSERT_TRUE(s.open(path));
    const auto list = s.conversations();
    ASSERT_EQ(list.size(), 2);
    EXPECT_EQ(list[0].title, QStringLiteral("Beta"));  // most recently updated first
    const auto alpha = s.conversation(list[1].id);
    ASSERT_TRUE(alpha);
    EXPECT_EQ(alpha->systemPrompt, QStringLiteral("Be brief."));
    EXPECT_EQ(alpha->reasoningEffort, QStringLiteral("high"));
    const auto msgs = s.messages(alpha->id);
    ASSERT_EQ(msgs.size(), 2);
    EXPECT_EQ(msgs[1].role, QStringLiteral("assistant"));
    EXPECT_EQ(msgs[1].content, QStringLiteral("**hello**"));
    EXPECT_EQ(msgs[1].reasoning, QStringLiteral("thinking"));
    EXPECT_EQ(msgs[1].stats.value(QStringLiteral("tokens")).toInt(), 7);

    // Search: by title and by message text, case-insensitive.
    ASSERT_EQ(s.conversations(QStringLiteral("ZEBRA")).size(), 1);
    EXPECT_EQ(s.conversations(QStringLiteral("ZEBRA"))[0].title, QStringLiteral("Beta"));
    EXPECT_EQ(s.conversations(QStringLiteral("alp")).size(), 1);
    EXPECT_TRUE(s.conversations(QStringLiteral("nothing like this")).isEmpty());

    ASSERT_TRUE(s.renameConversation(alpha->id, QStringLiteral("Renamed")));
    EXPECT_EQ(s.conversation(alpha->id)->title, QStringLiteral("Renamed"));
    EXPECT_FALSE(s.renameConversation(9999, QStringLiteral("x")));
    ASSERT_TRUE(s.truncate(alpha->id, 1));
    EXPECT_EQ(s.messages(alpha->id).size(), 1);
    ASSERT_TRUE(s.deleteConversation(alpha->id));
    EXPECT_FALSE(s.conversation(alpha->id));
    EXPECT_TRUE(s.messages(alpha->id).isEmpty());
    EXPECT_TRUE(s.integrityOk());
}

TEST(ConversationStore, MigratesAVersion1FileKeepingItsMessages) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("v1.sqlite"));
    // The version-1 schema exactly as the first release wrote it.
    rawSql(path,
           {QStringLiteral("CREATE TABLE schema_version (version INTEGER NOT NULL)"),
            QStringLiteral("INSERT INTO schema_version VALUES (1)"),
            QStringLiteral(
                "CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                " title TEXT NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL)"),
            QStringLiteral(
                "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                " conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
                " position INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,"
                " reasoning TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL,"
                " UNIQUE (conversation_id, position))"),
            QStringLiteral("INSERT INTO conversations VALUES (1, 'old chat', 1, 2)"),
            QStringLiteral(
                "INSERT INTO messages (conversation_id, position, role, content, created_ms)"
                " VALUES (1, 0, 'user', 'from v1', 1)")});
    ConversationStore s;
    ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
    EXPECT_EQ(s.schemaVersion(), ConversationStore::kSchemaVersion);
    const auto c = s.conversation(1);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->title, QStringLiteral("old chat"));
    EXPECT_EQ(c->reasoningEffort, QStringLiteral("medium"));  // the v2 column's default
    EXPECT_EQ(c->sampling, SamplingSettings{});               // the v4 column's default
    const auto msgs = s.messages(1);
    ASSERT_EQ(msgs.size(), 1);
    EXPECT_EQ(msgs[0].content, QStringLiteral("from v1"));
    EXPECT_TRUE(msgs[0].stats.isEmpty());
    // New rows use the new columns.
    EXPECT_GT(s.appendMessage(1, QStringLiteral("assistant"), QStringLiteral("ok"), {},
                              {{QStringLiteral("tokens"), 3}})
                  .id,
              0);
    EXPECT_EQ(s.messages(1)[1].stats.value(QStringLiteral("tokens")).toInt(), 3);
}

// The settings panel's values live with the conversation; a damaged or hand-edited value reads
// as the defaults (not JSON) or is clamped into the API's limits (numbers out of range).
TEST(ConversationStore, KeepsEachConversationsSamplingSettings) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("sampling.sqlite"));
    SamplingSettings custom;
    custom.temperature = 0.25;
    custom.topP = 0.8;
    custom.topK = 40;
    custom.minP = 0.1;
    custom.fixedSeed = true;
    custom.seed = 1234;
    custom.maxTokens = 333;
    qint64 a = 0, b = 0;
    {
        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        a = s.createConversation(QStringLiteral("a"));
        b = s.createConversation(QStringLiteral("b"));
        ASSERT_TRUE(s.setConversationSampling(a, custom));
        EXPECT_NE(QString::fromUtf8(s.exportJson(a)).indexOf(QStringLiteral("\"top_k\": 40")), -1);
    }
    ConversationStore s;
    ASSERT_TRUE(s.open(path));
    EXPECT_EQ(s.conversation(a)->sampling, custom);
    EXPECT_EQ(s.conversation(a)->sampling.seed, 1234);
    EXPECT_EQ(s.conversation(b)->sampling, SamplingSettings{});
    s.close();

    rawSql(path,
           {QStringLiteral("UPDATE conversations SET sampling = 'not json' WHERE id = %1").arg(a),
            QStringLiteral("UPDATE conversations SET sampling = '{\"temperature\": 9, "
                           "\"top_p\": 0, \"top_k\": -3, \"min_p\": \"x\", "
                           "\"seed\": 0}' WHERE id = %1")
                .arg(b)});
    ASSERT_TRUE(s.open(path));
    EXPECT_EQ(s.conversation(a)->sampling, SamplingSettings{});
    const SamplingSettings clamped = s.conversation(b)->sampling;
    EXPECT_EQ(clamped.temperature, SamplingSettings::kMaxTemperature);
    EXPECT_GT(clamped.topP, 0.0);
    EXPECT_EQ(clamped.topK, 0);
    EXPECT_EQ(clamped.minP, 0.0);
    EXPECT_TRUE(clamped.fixedSeed);
    EXPECT_EQ(clamped.seed, 1);
}

TEST(ConversationStore, RefusesAFileFromANewerAppWithoutTouchingIt) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("future.sqlite"));
    rawSql(path, {QStringLiteral("CREATE TABLE schema_version (version INTEGER NOT NULL)"),
                  QStringLiteral("INSERT INTO schema_version VALUES (99)")});
    ConversationStore s;
    EXPECT_FALSE(s.open(path));
    EXPECT_NE(s.lastError().indexOf(QStringLiteral("newer")), -1) << s.lastError().toStdString();
    EXPECT_FALSE(s.isOpen());
    EXPECT_EQ(rawInt(path, QStringLiteral("SELECT version FROM schema_version")), 99);
}

TEST(ConversationStore, RejectsAFileThatIsNotADatabase) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("junk.sqlite"));
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(4096, 'x'));
    f.close();
    ConversationStore s;
    EXPECT_FALSE(s.open(path));
    EXPECT_NE(s.lastError().indexOf(path), -1) << s.lastError().toStdString();
    EXPECT_FALSE(s.open(dir.filePath(QStringLiteral("no/such/folder/c.sqlite"))));
}

TEST(ConversationStore, AFailedAppendRollsBackAndLeavesNothing) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    ConversationStore s;
    ASSERT_TRUE(s.open(path));
    const auto m = s.appendMessage(12345, QStringLiteral("user"), QStringLiteral("orphan"));
    EXPECT_EQ(m.id, 0);
    EXPECT_FALSE(s.lastError().isEmpty());
    s.close();
    EXPECT_EQ(rawInt(path, QStringLiteral("SELECT COUNT(*) FROM messages")), 0);
}

TEST(ConversationStore, ExportsMarkdownAndJson) {
    QTemporaryDir dir;
    ConversationStore s;
    ASSERT_TRUE(s.open(dir.filePath(QStringLiteral("c.sqlite"))));
    const qint64 id = s.createConversation(QStringLiteral("Export me"));
    s.appendMessage(id, QStringLiteral("user"), QStringLiteral("What is 2+2?"));
    s.appendMessage(id, QStringLiteral("assistant"), QStringLiteral("It is `4`."),
                    QStringLiteral("simple sum"), {{QStringLiteral("tokens"), 5}});
    const QString md = s.exportMarkdown(id);
    EXPECT_TRUE(md.startsWith(QStringLiteral("# Export me\n")));
    EXPECT_NE(md.indexOf(QStringLiteral("## User\n\nWhat is 2+2?")), -1);
    EXPECT_NE(md.indexOf(QStringLiteral("## Assistant")), -1);
    EXPECT_NE(md.indexOf(QStringLiteral("simple sum")), -1);
    const QJsonObject root = QJsonDocument::fromJson(s.exportJson(id)).object();
    EXPECT_EQ(root.value(QStringLiteral("title")).toString(), QStringLiteral("Export me"));
    const QJsonArray msgs = root.value(QStringLiteral("messages")).toArray();
    ASSERT_EQ(msgs.size(), 2);
    EXPECT_EQ(msgs[1].toObject().value(QStringLiteral("content")).toString(),
              QStringLiteral("It is `4`."));
    EXPECT_EQ(msgs[1]
                  .toObject()
                  .value(QStringLiteral("stats"))
                  .toObject()
                  .value(QStringLiteral("tokens"))
                  .toInt(),
              5);
    EXPECT_TRUE(s.exportJson(999).isEmpty());
}

// A writer process is SIGKILLed while it streams messages: the file passes integrity_check and
// holds every message whose commit it reported, in order, with nothing half-written.
TEST(ConversationStore, AKilledWriterLosesAtMostTheMessageBeingGenerated) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("crash.sqlite"));
    for (int round = 0; round < 3; ++round) {
        QProcess p;
        p.start(QStringLiteral(NEURAL_CRASH_HELPER), {path});
        ASSERT_TRUE(p.waitForStarted(10000));
        int lastCommitted = -1;
        QByteArray pending;
        const int target = 20 + round * 15;
        while (lastCommitted < target && p.state() == QProcess::Running) {
            p.waitForReadyRead(10000);
            pending += p.readAllStandardOutput();
            qsizetype nl;
            while ((nl = pending.indexOf('\n')) >= 0) {
                const QByteArray line = pending.left(nl);
                pending.remove(0, nl + 1);
                if (line.startsWith("committed ")) lastCommitted = line.mid(10).toInt();
            }
        }
        ASSERT_GE(lastCommitted, target) << p.readAllStandardError().toStdString();
        p.kill();  // SIGKILL: no destructor, no close, mid-transaction
        p.waitForFinished(10000);
        ASSERT_EQ(p.exitStatus(), QProcess::CrashExit);
        // Lines still in the pipe: commits reported before the kill landed.
        pending += p.readAllStandardOutput();
        for (const QByteArray& line : pending.split('\n'))
            if (line.startsWith("committed "))
                lastCommitted = std::max(lastCommitted, line.mid(10).toInt());

        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        EXPECT_TRUE(s.integrityOk());
        const auto convs = s.conversations();
        ASSERT_EQ(convs.size(), round + 1);         // one per helper run
        const auto msgs = s.messages(convs[0].id);  // this round's conversation
        ASSERT_GE(msgs.size(), lastCommitted + 1);
        // The kill may land after a commit the helper had no time to report (one more row),
        // never inside one.
        EXPECT_LE(msgs.size(), lastCommitted + 2);
        for (int i = 0; i < msgs.size(); ++i) {
            EXPECT_EQ(msgs[i].position, i);
            EXPECT_EQ(msgs[i].content, QStringLiteral("message %1").arg(i));
        }
    }
}

}  // namespace
}  // namespace neural::gui
